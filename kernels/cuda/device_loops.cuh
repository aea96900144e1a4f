#pragma once
// CUDA drivers of the element functors shared with the host loops (kernels/cpu/host_loops.hpp):
// one grid-stride launch over elements, and a per-group reduction (blocks over chunks of
// groups, shared-memory trees in double, chunk partials added in order). Launches are
// asynchronous on the caller's stream; scratch comes from the tracked allocator.
#include "kernels/floor.hpp"
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "decomp/box.hpp"
#include "decomp/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/device/device.hpp"
#include "kernels/device/memory.hpp"

namespace tessera::kernels {

// After a launch: a bad configuration is reported with the kernel's name; the launch is
// counted (device::stats). Errors of the asynchronous work surface at the next sync.
inline void check_launch(const char* what, unsigned launches = 1) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, what, __FILE__, __LINE__);
  device::count_launches(launches);
}

// One launch of a kernel that uses local memory (ptxas -v: a stack frame; the per-thread arrays
// of the register buckets, the float64 128-wide fused attention): the driver reserves that
// memory for every resident thread at the first such launch, outside the tracked allocator,
// and with the device cache holding the rest of the memory the reservation fails
// (cudaErrorMemoryAllocation, not sticky). The launch is then made once more with the cache
// given back. `launch` must make exactly one launch (a failed one did nothing); an error left
// by an earlier call is reported first, so it cannot pass for this launch's and repeat it.
template <class Launch>
void launch_with_room(const char* what, Launch&& launch) {
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw_cuda_error(e, (std::string("a call before the launch of ") + what).c_str(), __FILE__,
                     __LINE__);
  launch();
  if (cudaPeekAtLastError() == cudaErrorMemoryAllocation && cached_device_bytes() > 0) {
    (void)cudaGetLastError();
    release_cached_device_memory();
    launch();
  }
  check_launch(what);
}

inline cudaStream_t stream_of(const Device& d) {
  return static_cast<cudaStream_t>(d.stream);
}

// Device scratch from the tracked allocator (memory stats stay true), released when it
// goes out of scope. cudaFree orders itself after the queued work that uses the block.
template <class T>
class DeviceScratch {
 public:
  explicit DeviceScratch(std::size_t count)
      : bytes_(count * sizeof(T)), p_(static_cast<T*>(mem_alloc(MemSpace::Cuda, bytes_))) {}
  ~DeviceScratch() { mem_free(MemSpace::Cuda, p_, bytes_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  T* get() const { return p_; }

 private:
  std::size_t bytes_;
  T* p_;
};

inline unsigned cuda_blocks_for(Index n, unsigned threads) {
  const Index b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

// Blocks for a kernel that takes one item per thread (no grid-stride loop): all of them,
// never capped as cuda_blocks_for's grids are (a capped grid would leave items undone).
inline unsigned cuda_blocks_exact(Index n, unsigned threads) {
  const Index b = (n + threads - 1) / threads;
  TESSERA_CHECK(b <= 0x7fffffff, "CUDA launch: " << n << " items exceed the grid's range");
  return static_cast<unsigned>(b > 0 ? b : 1);
}

template <class F>
__global__ void for_each_kernel(Index n, F f) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    f(i);
}

template <class F>
void cuda_for_each(const Device& d, Index n, const F& f, const char* what) {
  if (n <= 0) return;
  for_each_kernel<F><<<cuda_blocks_for(n, 256), 256, 0, stream_of(d)>>>(n, f);
  check_launch(what);
}

constexpr unsigned kReduceThreads = 256;
constexpr Index kDeviceReduceChunk = Index{1} << 14;

// Sums chunk w (of `chunk` cells) of group w / chunks with one block; the block's result
// goes to the partials, or straight to r.store when a group is a single chunk.
template <class R>
__global__ void group_partial_kernel(Index groups, Index size, Index chunks, R r, double* pa,
                                     double* pb) {
  __shared__ double sa[kReduceThreads], sb[kReduceThreads];
  for (Index w = blockIdx.x; w < groups * chunks; w += gridDim.x) {
    const Index g = w / chunks, lo = (w % chunks) * kDeviceReduceChunk;
    const Index hi = lo + kDeviceReduceChunk < size ? lo + kDeviceReduceChunk : size;
    double a = 0, b = 0;
    for (Index j = lo + threadIdx.x; j < hi; j += blockDim.x) r.add(g, j, a, b);
    sa[threadIdx.x] = a;
    sb[threadIdx.x] = b;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s) {
        sa[threadIdx.x] += sa[threadIdx.x + s];
        sb[threadIdx.x] += sb[threadIdx.x + s];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (pa) {
        pa[w] = sa[0];
        pb[w] = sb[0];
      } else {
        r.store(g, sa[0], sb[0]);
      }
    }
    __syncthreads();
  }
}

// Adds the chunk partials of each group in order and stores them.
template <class R>
__global__ void group_finish_kernel(Index groups, Index chunks, R r, const double* pa,
                                    const double* pb) {
  for (Index g = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<Index>(gridDim.x) * blockDim.x) {
    double a = 0, b = 0;
    for (Index k = 0; k < chunks; ++k) {
      a += pa[g * chunks + k];
      b += pb[g * chunks + k];
    }
    r.store(g, a, b);
  }
}

// Per-group reduction: one launch when every group fits one chunk, else a partial pass
// over (group, chunk) blocks and an in-order finish, so few large groups fill the device.
template <class R>
void cuda_group_reduce(const Device& d, Index groups, Index size, const R& r, const char* what) {
  if (groups <= 0) return;
  const Index chunks =
      size > kDeviceReduceChunk ? (size + kDeviceReduceChunk - 1) / kDeviceReduceChunk : 1;
  const Index work = groups * chunks;
  const unsigned blocks = static_cast<unsigned>(work < 65535 ? work : 65535);
  if (chunks == 1) {
    group_partial_kernel<R>
        <<<blocks, kReduceThreads, 0, stream_of(d)>>>(groups, size, 1, r, nullptr, nullptr);
    check_launch(what);
    return;
  }
  DeviceScratch<double> part(2 * static_cast<std::size_t>(work));
  group_partial_kernel<R><<<blocks, kReduceThreads, 0, stream_of(d)>>>(
      groups, size, chunks, r, part.get(), part.get() + work);
  check_launch(what);
  group_finish_kernel<R><<<cuda_blocks_for(groups, 256), 256, 0, stream_of(d)>>>(
      groups, chunks, r, part.get(), part.get() + work);
  check_launch(what);
}

}  // namespace tessera::kernels
