// The device layer (kernels/device/device.hpp) for both builds: the CUDA calls sit behind
// `if constexpr (kCudaEnabled)`, so a build without CUDA has the same entry points and
// refuses device work with one message.
#include "kernels/device/device.hpp"

#include <atomic>
#include <string>

#include "decomp/error.hpp"
#include "kernels/device/memory.hpp"
#if defined(TESSERA_HAVE_CUDA)
#include "kernels/cuda/cuda_check.hpp"
#endif

namespace tessera {

void throw_without_cuda(const char* what) {
  throw Error(std::string(what) + ": Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}

Device Device::cuda() {
  if constexpr (!kCudaEnabled) throw_without_cuda("a CUDA device");
  return {MemSpace::Cuda, device::current_stream()};
}

}  // namespace tessera

namespace tessera::device {
namespace {
struct Counters {
  std::atomic<std::uint64_t> h2d_copies{0}, h2d_bytes{0}, d2h_copies{0}, d2h_bytes{0};
  std::atomic<std::uint64_t> d2d_copies{0}, d2d_bytes{0}, launches{0}, allocs{0};
};
Counters& counters() {
  static Counters c;
  return c;
}
void* g_stream = nullptr;
}  // namespace

bool built_with_cuda() {
  return kCudaEnabled;
}

int count() {
  int n = 0;
#if defined(TESSERA_HAVE_CUDA)
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: report none, clear the error
    return 0;
  }
#endif
  return n;
}

std::size_t free_bytes() {
  std::size_t free = 0;
#if defined(TESSERA_HAVE_CUDA)
  std::size_t total = 0;
  if (count() == 0 || cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
#endif
  return free;
}

void select(int dev) {
#if defined(TESSERA_HAVE_CUDA)
  TESSERA_CUDA_CHECK(cudaSetDevice(dev));
#else
  (void)dev;
  throw_without_cuda("device::select");
#endif
}

int current() {
  int d = -1;
#if defined(TESSERA_HAVE_CUDA)
  TESSERA_CUDA_CHECK(cudaGetDevice(&d));
#endif
  return d;
}

int device_of(const void* p) noexcept {
#if defined(TESSERA_HAVE_CUDA)
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) == cudaSuccess) return a.device;
  (void)cudaGetLastError();
#else
  (void)p;
#endif
  return -1;
}

void* current_stream() {
  return g_stream;
}
void set_current_stream(void* stream) {
  // Cached device blocks are reused in the order of the stream that freed them.
  if (stream != g_stream) release_cached_device_memory();
  g_stream = stream;
}

void* alloc(std::size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
#if defined(TESSERA_HAVE_CUDA)
  ++counters().allocs;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it
    throw AllocationError("device allocation of " + std::to_string(bytes) + " bytes failed (" +
                          cudaGetErrorString(e) + ")");
  }
  if (e != cudaSuccess && count() == 0) {
    (void)cudaGetLastError();
    throw Error(std::string("device allocation: no CUDA device is visible to this process (") +
                cudaGetErrorString(e) + "); use host memory (MemSpace::Host)");
  }
  TESSERA_CUDA_CHECK(e);
#else
  throw_without_cuda("device::alloc");
#endif
  return p;
}
void free(void* p) noexcept {
#if defined(TESSERA_HAVE_CUDA)
  if (p) (void)cudaFree(p);
#else
  (void)p;
#endif
}
void* alloc_pinned(std::size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
#if defined(TESSERA_HAVE_CUDA)
  TESSERA_CUDA_CHECK(cudaMallocHost(&p, bytes));
#else
  throw_without_cuda("device::alloc_pinned");
#endif
  return p;
}
void free_pinned(void* p) noexcept {
#if defined(TESSERA_HAVE_CUDA)
  if (p) (void)cudaFreeHost(p);
#else
  (void)p;
#endif
}

void copy(void* dst, const void* src, std::size_t bytes, Copy kind) {
  if (bytes == 0) return;
  Counters& c = counters();
  switch (kind) {
    case Copy::HostToDevice:
      ++c.h2d_copies, c.h2d_bytes += bytes;
      break;
    case Copy::DeviceToHost:
      ++c.d2h_copies, c.d2h_bytes += bytes;
      break;
    case Copy::DeviceToDevice:
      ++c.d2d_copies, c.d2d_bytes += bytes;
      break;
  }
#if defined(TESSERA_HAVE_CUDA)
  const cudaMemcpyKind k = kind == Copy::HostToDevice   ? cudaMemcpyHostToDevice
                           : kind == Copy::DeviceToHost ? cudaMemcpyDeviceToHost
                                                        : cudaMemcpyDeviceToDevice;
  // On the kernels' stream, then waited for: the caller may read or free the data next.
  auto* s = static_cast<cudaStream_t>(g_stream);
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, s));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
#else
  (void)dst, (void)src;
  throw_without_cuda("device::copy");
#endif
}

void memset_zero(void* p, std::size_t bytes) {
  if (bytes == 0) return;
#if defined(TESSERA_HAVE_CUDA)
  count_launches();
  TESSERA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(g_stream)));
#else
  (void)p;
  throw_without_cuda("device::memset_zero");
#endif
}

void synchronize(const Device& d) {
  if (d.is_host()) return;
#if defined(TESSERA_HAVE_CUDA)
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(d.stream)));
#endif
}

void synchronize() {
#if defined(TESSERA_HAVE_CUDA)
  TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
#endif
}

bool is_device_pointer(const void* p) {
#if defined(TESSERA_HAVE_CUDA)
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
#else
  (void)p;
  return false;
#endif
}

Stats stats() {
  const Counters& c = counters();
  return {c.h2d_copies, c.h2d_bytes, c.d2h_copies, c.d2h_bytes,
          c.d2d_copies, c.d2d_bytes, c.launches,   c.allocs};
}
void reset_stats() {
  Counters& c = counters();
  for (auto* a : {&c.h2d_copies, &c.h2d_bytes, &c.d2h_copies, &c.d2h_bytes, &c.d2d_copies,
                  &c.d2d_bytes, &c.launches, &c.allocs})
    a->store(0);
}
void count_launches(std::uint64_t n) {
  counters().launches += n;
}

}  // namespace tessera::device
