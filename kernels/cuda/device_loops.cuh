#pragma once
// CUDA drivers of the element functors shared with the host loops (kernels/cpu/host_loops.hpp):
// one grid-stride launch over elements, and a per-group reduction with one block per group
// (grid-stride over groups) and a shared-memory tree in double. Synchronous on the default
// stream, like every CUDA kernel entry point of the project.
#include <cuda_runtime.h>

#include <string>

#include "decomp/box.hpp"
#include "decomp/error.hpp"

namespace tessera::kernels {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

inline unsigned cuda_blocks_for(Index n, unsigned threads) {
  const Index b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

template <class F>
__global__ void for_each_kernel(Index n, F f) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    f(i);
}

template <class F>
void cuda_for_each(Index n, const F& f, const char* what) {
  if (n <= 0) return;
  for_each_kernel<F><<<cuda_blocks_for(n, 256), 256>>>(n, f);
  cuda_check(cudaGetLastError(), what);
  cuda_check(cudaDeviceSynchronize(), what);
}

constexpr unsigned kReduceThreads = 256;

template <class R>
__global__ void group_reduce_kernel(Index groups, Index size, R r) {
  __shared__ double sa[kReduceThreads], sb[kReduceThreads];
  for (Index g = blockIdx.x; g < groups; g += gridDim.x) {
    double a = 0, b = 0;
    for (Index j = threadIdx.x; j < size; j += blockDim.x) r.add(g, j, a, b);
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
    if (threadIdx.x == 0) r.store(g, sa[0], sb[0]);
    __syncthreads();
  }
}

template <class R>
void cuda_group_reduce(Index groups, Index size, const R& r, const char* what) {
  if (groups <= 0) return;
  const unsigned blocks = static_cast<unsigned>(groups < 65535 ? groups : 65535);
  group_reduce_kernel<R><<<blocks, kReduceThreads>>>(groups, size, r);
  cuda_check(cudaGetLastError(), what);
  cuda_check(cudaDeviceSynchronize(), what);
}

}  // namespace tessera::kernels
