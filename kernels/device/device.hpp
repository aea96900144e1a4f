#pragma once
// The CUDA device layer of the runtime: allocation, copies, device selection. Built
// against the CUDA runtime when TESSERA_HAVE_CUDA, else every entry point but the
// queries throws "built without CUDA". No CUDA header leaks into this interface.
#include "kernels/floor.hpp"
#include <cstddef>

namespace tessera::device {

bool built_with_cuda();
int count();  // devices visible to this process (0 without CUDA or without a GPU)
void select(int dev);
int current();

void* alloc(std::size_t bytes);
void free(void* p) noexcept;
void* alloc_pinned(std::size_t bytes);  // page-locked host memory for staging
void free_pinned(void* p) noexcept;

enum class Copy { HostToDevice, DeviceToHost, DeviceToDevice };
void copy(void* dst, const void* src, std::size_t bytes, Copy kind);
void memset_zero(void* p, std::size_t bytes);
void synchronize();

// True if p is device memory (managed memory counts as device).
bool is_device_pointer(const void* p);

}  // namespace tessera::device
