// CUDA runtime implementation of runtime/device.hpp (compiled when TESSERA_HAVE_CUDA).
#include <cuda_runtime_api.h>

#include <string>

#include "kernels/device/device.hpp"
#include "decomp/error.hpp"

namespace tessera::device {
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}
}  // namespace

bool built_with_cuda() {
  return true;
}

int count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: report none, clear the error
    return 0;
  }
  return n;
}

void select(int dev) {
  check(cudaSetDevice(dev), "cudaSetDevice");
}

int current() {
  int d = -1;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

void* alloc(std::size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}
void free(void* p) noexcept {
  if (p) (void)cudaFree(p);
}
void* alloc_pinned(std::size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  check(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}
void free_pinned(void* p) noexcept {
  if (p) (void)cudaFreeHost(p);
}

void copy(void* dst, const void* src, std::size_t bytes, Copy kind) {
  if (bytes == 0) return;
  const cudaMemcpyKind k = kind == Copy::HostToDevice   ? cudaMemcpyHostToDevice
                           : kind == Copy::DeviceToHost ? cudaMemcpyDeviceToHost
                                                        : cudaMemcpyDeviceToDevice;
  check(cudaMemcpy(dst, src, bytes, k), "cudaMemcpy");
}

void memset_zero(void* p, std::size_t bytes) {
  if (bytes) check(cudaMemset(p, 0, bytes), "cudaMemset");
}

void synchronize() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

bool is_device_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

}  // namespace tessera::device
