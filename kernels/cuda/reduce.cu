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
double whole_sum(const Device& dev, DType type, Index n, const void* x, const char* where) {
  TESSERA_CHECK(n >= 0, where << ": negative count " << n);
  if (n == 0) return 0.0;
  const Index b = (n + kReduceThreads - 1) / kReduceThreads;
  const unsigned blocks = static_cast<unsigned>(b < 1024 ? b : 1024);
  DeviceScratch<double> part(blocks);
  std::vector<double> host(blocks);
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    partial_sums_kernel<T, Squares>
        <<<blocks, kReduceThreads, 0, stream_of(dev)>>>(static_cast<const T*>(x), n, part.get());
  });
  check_launch(where);
  // The host needs the partials: copy on the stream, then wait for it.
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(host.data(), part.get(), blocks * sizeof(double),
                                     cudaMemcpyDeviceToHost, stream_of(dev)));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_of(dev)));
  double s = 0;
  for (double v : host) s += v;
  return s;
}

}  // namespace

double cuda::reduce_sum(const Device& dev, DType type, Index n, const void* x) {
  return whole_sum<false>(dev, type, n, x, "reduce_sum_cuda");
}
double cuda::reduce_mean(const Device& dev, DType type, Index n, const void* x) {
  TESSERA_CHECK(n > 0, "reduce_mean_cuda: mean of " << n << " elements");
  return whole_sum<false>(dev, type, n, x, "reduce_mean_cuda") / static_cast<double>(n);
}
double cuda::reduce_sum_squares(const Device& dev, DType type, Index n, const void* x) {
  return whole_sum<true>(dev, type, n, x, "reduce_sum_squares_cuda");
}

void cuda::stat_sums(const Device& dev, const StatLayout& l, DType type, const void* x, double* sum,
                     double* sumsq) {
  check_stat_layout(l, "stat_sums_cuda");
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    cuda_group_reduce(dev, l.count(), l.size(),
                      StatSums<T>{l, static_cast<const T*>(x), sum, sumsq}, "stat_sums_cuda");
  });
}
void cuda::channel_sums(const Device& dev, DType type, Index n, Index c, Index inner, const void* x,
                        double* sum, double* sumsq) {
  cuda::stat_sums(dev, StatLayout::per_channel(n, c, inner), type, x, sum, sumsq);
}
void cuda::group_sums(const Device& dev, DType type, Index n, Index c, Index groups, Index inner,
                      const void* x, double* sum, double* sumsq) {
  cuda::stat_sums(dev, StatLayout::per_group(n, c, inner, groups), type, x, sum, sumsq);
}

}  // namespace tessera::kernels
