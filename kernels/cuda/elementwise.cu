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

void finish(const char* what) {
  cuda_check(cudaGetLastError(), what);
  cuda_check(cudaDeviceSynchronize(), what);
}

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

template <class T>
double sum_sq(Count n, const T* a, const T* b) {
  if (n == 0) return 0;
  double* d_sums = nullptr;
  cuda_check(cudaMalloc(&d_sums, kReduceBlocks * sizeof(double)), "sum of squares: cudaMalloc");
  std::vector<double> sums(kReduceBlocks, 0.0);
  sum_sq_kernel<T><<<kReduceBlocks, kThreads>>>(n, a, b, d_sums);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess)
    e = cudaMemcpy(sums.data(), d_sums, kReduceBlocks * sizeof(double), cudaMemcpyDeviceToHost);
  cudaFree(d_sums);
  cuda_check(e, "sum of squares kernel");
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

void axpy_cuda(DType s, Count n, double alpha, const void* x, void* y) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    axpy_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads>>>(
        n, static_cast<T>(alpha), static_cast<const T*>(x), static_cast<T*>(y));
  });
  finish("axpy kernel");
}

void add_f64_cuda(DType s, Count n, const double* x, void* y) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    add_f64_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads>>>(n, x, static_cast<T*>(y));
  });
  finish("float64 accumulate kernel");
}

void scale_cuda(DType s, Count n, double alpha, void* y) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    scale_kernel<T>
        <<<cuda_blocks_for(n, kThreads), kThreads>>>(n, static_cast<T>(alpha), static_cast<T*>(y));
  });
  finish("scale kernel");
}

void scaled_diff_cuda(DType s, Count n, double alpha, const void* a, const void* b, void* out) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    scaled_diff_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads>>>(
        n, static_cast<T>(alpha), static_cast<const T*>(a), static_cast<const T*>(b),
        static_cast<T*>(out));
  });
  finish("scaled difference kernel");
}

double sum_squares_cuda(DType s, Count n, const void* x) {
  return dispatch(s, [&](auto t) {
    using T = decltype(t);
    return sum_sq<T>(n, static_cast<const T*>(x), nullptr);
  });
}

double sum_sq_diff_cuda(DType s, Count n, const void* a, const void* b) {
  return dispatch(s, [&](auto t) {
    using T = decltype(t);
    return sum_sq<T>(n, static_cast<const T*>(a), static_cast<const T*>(b));
  });
}

void sgd_update_cuda(DType s, Count n, void* p, const void* g, void* buf, const SgdArgs& a) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    sgd_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads>>>(
        n, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(buf), a);
  });
  finish("SGD update kernel");
}

void adam_update_cuda(DType s, Count n, void* p, const void* g, void* m, void* v,
                      const AdamArgs& a) {
  if (n == 0) return;
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    adam_kernel<T><<<cuda_blocks_for(n, kThreads), kThreads>>>(
        n, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(m), static_cast<T*>(v), a);
  });
  finish("Adam update kernel");
}

}  // namespace tessera::kernels
