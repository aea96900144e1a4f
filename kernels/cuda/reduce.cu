// Reductions on CUDA, accumulated in double. Whole-array sums: one launch of block
// partial sums, then the (at most 1024) partials are added on the host in a fixed order,
// so the result is deterministic.
#include <vector>

#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"
#include "kernels/reduce.hpp"
#include "kernels/reduce_impl.hpp"

namespace tessera::kernels {
namespace {

template <class T, bool Squares>
__global__ void partial_sums_kernel(const T* x, Index n, double* part) {
  __shared__ double s[kReduceThreads];
  double a = 0;
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const double v = static_cast<double>(x[i]);
    a += Squares ? v * v : v;
  }
  s[threadIdx.x] = a;
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

template <bool Squares>
double whole_sum(DType type, Index n, const void* x, const char* where) {
  TESSERA_CHECK(n >= 0, where << ": negative count " << n);
  if (n == 0) return 0.0;
  const Index b = (n + kReduceThreads - 1) / kReduceThreads;
  const unsigned blocks = static_cast<unsigned>(b < 1024 ? b : 1024);
  DeviceScratch<double> part = device_scratch<double>(blocks, where);
  std::vector<double> host(blocks);
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    partial_sums_kernel<T, Squares>
        <<<blocks, kReduceThreads>>>(static_cast<const T*>(x), n, part.get());
  });
  cuda_check(cudaGetLastError(), where);
  cuda_check(cudaMemcpy(host.data(), part.get(), blocks * sizeof(double), cudaMemcpyDeviceToHost),
             where);
  cuda_check(cudaFree(part.release()), where);
  double s = 0;
  for (double v : host) s += v;
  return s;
}

}  // namespace

double reduce_sum_cuda(DType type, Index n, const void* x) {
  return whole_sum<false>(type, n, x, "reduce_sum_cuda");
}
double reduce_mean_cuda(DType type, Index n, const void* x) {
  TESSERA_CHECK(n > 0, "reduce_mean_cuda: mean of " << n << " elements");
  return whole_sum<false>(type, n, x, "reduce_mean_cuda") / static_cast<double>(n);
}
double reduce_sum_squares_cuda(DType type, Index n, const void* x) {
  return whole_sum<true>(type, n, x, "reduce_sum_squares_cuda");
}

void stat_sums_cuda(const StatLayout& l, DType type, const void* x, double* sum, double* sumsq) {
  check_stat_layout(l, "stat_sums_cuda");
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    cuda_group_reduce(l.count(), l.size(), StatSums<T>{l, static_cast<const T*>(x), sum, sumsq},
                      "stat_sums_cuda");
  });
}
void channel_sums_cuda(DType type, Index n, Index c, Index inner, const void* x, double* sum,
                       double* sumsq) {
  stat_sums_cuda(StatLayout::per_channel(n, c, inner), type, x, sum, sumsq);
}
void group_sums_cuda(DType type, Index n, Index c, Index groups, Index inner, const void* x,
                     double* sum, double* sumsq) {
  stat_sums_cuda(StatLayout::per_group(n, c, inner, groups), type, x, sum, sumsq);
}

}  // namespace tessera::kernels
