// CUDA element-wise arithmetic, reductions and optimizer updates. Reductions are
// deterministic: a fixed grid writes one double per block, the host adds them in order.
#include <vector>

#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/optim_update.hpp"

namespace tessera::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceBlocks = 1024;

#define GRID_LOOP(i, n)                                                              \
  for (Count i = blockIdx.x * static_cast<Count>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<Count>(gridDim.x) * blockDim.x)

template <class T>
__global__ void axpy_kernel(Count n, T alpha, const T* x, T* y) {
  GRID_LOOP(i, n) y[i] += alpha * x[i];
}
template <class T>
__global__ void add_f64_kernel(Count n, const double* x, T* y) {
  GRID_LOOP(i, n) y[i] += static_cast<T>(x[i]);
}
template <class T>
__global__ void scale_kernel(Count n, T alpha, T* y) {
  GRID_LOOP(i, n) y[i] *= alpha;
}
template <class T>
__global__ void scaled_diff_kernel(Count n, T alpha, const T* a, const T* b, T* out) {
  GRID_LOOP(i, n) out[i] = alpha * (a[i] - b[i]);
}

// One double per block: the block's sum of (a[i] - b[i])^2 (b null: a[i]^2).
template <class T>
__global__ void sum_sq_kernel(Count n, const T* a, const T* b, double* block_sums) {
  __shared__ double shared[kThreads];
  double acc = 0;
  GRID_LOOP(i, n) {
    const double d = b ? static_cast<double>(a[i]) - static_cast<double>(b[i]) : a[i];
    acc += d * d;
  }
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) block_sums[blockIdx.x] = shared[0];
}

// The host needs the result: the block sums come back on the stream, which is then waited for.
template <class T>
double sum_sq(const Device& dev, Count n, const T* a, const T* b) {
  if (n == 0) return 0;
  DeviceScratch<double> d_sums(kReduceBlocks);
  std::vector<double> sums(kReduceBlocks, 0.0);
  sum_sq_kernel<T><<<kReduceBlocks, kThreads, 0, stream_of(dev)>>>(n, a, b, d_sums.get());
  check_launch("sum of squares kernel");
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(sums.data(), d_sums.get(), kReduceBlocks * sizeof(double),
                                     cudaMemcpyDeviceToHost, stream_of(dev)));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_of(dev)));
  double total = 0;
  for (double v : sums) total += v;
  return total;
}

template <class T>
__global__ void sgd_kernel(Count n, T* p, const T* g, T* buf, SgdArgs a) {
  GRID_LOOP(i, n) {
    T dummy{};
    sgd_element(p[i], g[i], buf ? buf[i] : dummy, a);
  }
}
template <class T>
__global__ void adam_kernel(Count n, T* p, const T* g, T* m, T* v, AdamArgs a) {
  GRID_LOOP(i, n) adam_element(p[i], g[i], m[i], v[i], a);
}

}  // namespace

void cuda::axpy(const Device& dev, DType s, Count n, double alpha, const void* x, void* y) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    axpy_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads, 0, stream_of(dev)>>>(
        n, static_cast<T>(alpha), static_cast<const T*>(x), static_cast<T*>(y));
  });
  check_launch("axpy kernel");
}

void cuda::add_f64(const Device& dev, DType s, Count n, const double* x, void* y) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    add_f64_kernel<T>
        <<<cuda_blocks_for(n, kThreads), kThreads, 0, stream_of(dev)>>>(n, x, static_cast<T*>(y));
  });
  check_launch("float64 accumulate kernel");
}

void cuda::scale(const Device& dev, DType s, Count n, double alpha, void* y) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    scale_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads, 0, stream_of(dev)>>>(
        n, static_cast<T>(alpha), static_cast<T*>(y));
  });
  check_launch("scale kernel");
}

void cuda::scaled_diff(const Device& dev, DType s, Count n, double alpha, const void* a,
                       const void* b, void* out) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    scaled_diff_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads, 0, stream_of(dev)>>>(
        n, static_cast<T>(alpha), static_cast<const T*>(a), static_cast<const T*>(b),
        static_cast<T*>(out));
  });
  check_launch("scaled difference kernel");
}

double cuda::sum_squares(const Device& dev, DType s, Count n, const void* x) {
  return dispatch(s, [&](auto t) {
    using T = decltype(t);
    return sum_sq<T>(dev, n, static_cast<const T*>(x), nullptr);
  });
}

double cuda::sum_sq_diff(const Device& dev, DType s, Count n, const void* a, const void* b) {
  return dispatch(s, [&](auto t) {
    using T = decltype(t);
    return sum_sq<T>(dev, n, static_cast<const T*>(a), static_cast<const T*>(b));
  });
}

void cuda::sgd_update(const Device& dev, DType s, Count n, void* p, const void* g, void* buf,
                      const SgdArgs& a) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    sgd_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads, 0, stream_of(dev)>>>(
        n, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(buf), a);
  });
  check_launch("SGD update kernel");
}

void cuda::adam_update(const Device& dev, DType s, Count n, void* p, const void* g, void* m,
                       void* v, const AdamArgs& a) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    adam_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads, 0, stream_of(dev)>>>(
        n, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(m), static_cast<T*>(v), a);
  });
  check_launch("Adam update kernel");
}

}  // namespace tessera::kernels
