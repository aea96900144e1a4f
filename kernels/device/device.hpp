#pragma once
// The device layer: which memory space and stream a kernel runs on (Device), device
// selection, allocation, copies and synchronization, and counters of what crossed the
// bus. One implementation (device.cpp) serves both builds: without CUDA the CUDA branch
// is compiled out (kCudaEnabled) and asking for it throws "built without CUDA". No CUDA
// header leaks into this interface.
#include "kernels/floor.hpp"
#include <cstddef>
#include <cstdint>

#include "decomp/mem_space.hpp"

namespace tessera {

#if defined(TESSERA_HAVE_CUDA)
inline constexpr bool kCudaEnabled = true;
#else
inline constexpr bool kCudaEnabled = false;
#endif

// Where a kernel runs: the memory space of its operands and, on CUDA, the stream it is
// launched on (null: the default stream). Tensors hand theirs to every kernel entry point;
// kernels launch asynchronously on it and the runtime synchronizes only where MPI or the
// host reads the data (device::synchronize).
struct Device {
  MemSpace space = MemSpace::Host;
  void* stream = nullptr;  // a cudaStream_t

  bool is_host() const { return space == MemSpace::Host; }
  static Device host() { return {}; }
  static Device cuda();  // the current stream (device::current_stream)
  static Device of(MemSpace s) { return s == MemSpace::Host ? host() : cuda(); }
};

// Thrown by a kernel entry point or device call that needs CUDA in a build without it.
[[noreturn]] void throw_without_cuda(const char* what);

}  // namespace tessera

namespace tessera::device {

bool built_with_cuda();
int count();  // devices visible to this process (0 without CUDA or without a GPU)
void select(int dev);
int current();
// The device a device pointer was allocated on; -1 where CUDA cannot say (never throws).
int device_of(const void* p) noexcept;

// The stream kernels of this process launch on (null, the default stream, unless set).
void* current_stream();
void set_current_stream(void* stream);

void* alloc(std::size_t bytes);
void free(void* p) noexcept;
// Free bytes of the current device (cudaMemGetInfo); 0 without one.
std::size_t free_bytes();
void* alloc_pinned(std::size_t bytes);  // page-locked host memory for staging
void free_pinned(void* p) noexcept;

enum class Copy { HostToDevice, DeviceToHost, DeviceToDevice };
// Synchronous with respect to the host (the data is there when it returns).
void copy(void* dst, const void* src, std::size_t bytes, Copy kind);
void memset_zero(void* p, std::size_t bytes);
// Waits for the work queued on d's stream (no-op for the host): before MPI or the host
// touches device data that kernels wrote.
void synchronize(const Device& d);
void synchronize();  // the whole device

// True if p is device memory (managed memory counts as device).
bool is_device_pointer(const void* p);

// What crossed the bus and how many kernels ran, since the last reset: the trainer prints
// it per step (train.device_stats), tests assert on it.
struct Stats {
  std::uint64_t h2d_copies = 0, h2d_bytes = 0;
  std::uint64_t d2h_copies = 0, d2h_bytes = 0;
  std::uint64_t d2d_copies = 0, d2d_bytes = 0;
  std::uint64_t launches = 0;  // kernels and library calls (cuDNN, cuBLAS) queued
  std::uint64_t allocs = 0;    // cudaMalloc calls (the cache's misses)
};
Stats stats();
void reset_stats();
void count_launches(std::uint64_t n = 1);

}  // namespace tessera::device
