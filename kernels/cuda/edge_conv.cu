// Edge convolution on CUDA: the Linear and its two adjoint products are cuBLAS GEMMs on the
// (m k, C + 3) edge matrix (row-major, so each call passes the transposed problem to the
// column-major library), the bias, the reduction over the neighbours and its adjoint are the
// functors the host runs (kernels/edge_conv_impl.hpp), the activation the shared one. The
// weight gradient is a GEMM into scratch of the element type, then added into the float64
// accumulator; the bias gradient is a float64 column sum. Float32 GEMMs run on FMA math (no TF32),
// as the host's.
#include <climits>

#include "decomp/error.hpp"
#include "kernels/activation.hpp"
#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"
#include "kernels/edge_conv.hpp"
#include "kernels/edge_conv_impl.hpp"

namespace tessera::kernels {
namespace {

// db[o] += sum over the edge rows of dz[r, o], summed in float64 as the host does (a float32
// GEMM against ones rounded each partial sum to float: 1e-7 sqrt(rows) off, more where the
// terms cancel).
template <class T>
struct ColumnSums {
  const T* dz;
  Index cols;
  double* db;
  __device__ void add(Index o, Index r, double& a, double&) const {
    a += static_cast<double>(dz[r * cols + o]);
  }
  __device__ void store(Index o, double a, double) const { db[o] += a; }
};

int as_int(Index n, const char* what) {
  TESSERA_CHECK(n >= 0 && n <= INT_MAX, what << ": dimension " << n << " exceeds cuBLAS's int");
  return static_cast<int>(n);
}

// Row-major C (m x n) = op(A) op(B) + beta C, with op(A) (m x k) and op(B) (k x n).
template <class T>
void gemm_rm(cublasHandle_t h, bool ta, bool tb, Index m, Index n, Index k, const T* a, Index lda,
             const T* b, Index ldb, T beta, T* c, Index ldc) {
  const T one = 1;
  const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const char* what = "edge_conv GEMM";
  // Column-major view: C^T (n x m) = op(B)^T op(A)^T.
  if constexpr (std::is_same_v<T, double>)
    cublas_check(cublasDgemm(h, ob, oa, as_int(n, what), as_int(m, what), as_int(k, what), &one, b,
                             as_int(ldb, what), a, as_int(lda, what), &beta, c, as_int(ldc, what)),
                 what);
  else
    cublas_check(cublasSgemm(h, ob, oa, as_int(n, what), as_int(m, what), as_int(k, what), &one, b,
                             as_int(ldb, what), a, as_int(lda, what), &beta, c, as_int(ldc, what)),
                 what);
}

template <class T>
void forward(const Device& dev, const EdgeConvShape& s, const T* e, const std::int64_t* ids,
             const T* w, const T* b, T* z, T* y, std::int64_t* argmax) {
  const Index m = s.points, k = s.neighbours, E = s.edge, O = s.out, rows = m * k;
  if (m == 0) return;
  gemm_rm<T>(cublas_for(dev), false, true, rows, O, E, e, E, w, E, T(0), z, O);  // edges W^T
  cuda_for_each(dev, rows * O, EdgeBias<T>{z, b, O}, "edge_conv_bias");
  DeviceScratch<T> h(static_cast<std::size_t>(rows * O));
  activation_forward(dev, s.activation, dtype_of<T>::value, rows * O, z, h.get());
  cuda_for_each(dev, m * O, EdgeReduce<T>{h.get(), ids, k, O, s.mean, y, argmax},
                "edge_conv_reduce");
}

template <class T>
void backward(const Device& dev, const EdgeConvShape& s, const T* e, const std::int64_t* ids,
              const T* w, const T* z, const std::int64_t* argmax, const T* dy, T* de, double* dw,
              double* db) {
  const Index m = s.points, k = s.neighbours, E = s.edge, O = s.out, rows = m * k;
  if (m == 0) return;
  const cublasHandle_t h = cublas_for(dev);
  DeviceScratch<T> dh(static_cast<std::size_t>(rows * O)), dz(static_cast<std::size_t>(rows * O));
  cuda_for_each(dev, m * O, EdgeReduceAdjoint<T>{dy, ids, argmax, k, O, s.mean, dh.get()},
                "edge_conv_reduce_adjoint");
  activation_backward(dev, s.activation, dtype_of<T>::value, rows * O, z, dh.get(), dz.get());
  gemm_rm<T>(h, false, false, rows, E, O, dz.get(), O, w, E, T(0), de, E);  // dedges = dz W
  // dW = dz^T edges in the element type (the host's GEMM too), then into the float64 sums.
  DeviceScratch<T> dwt(static_cast<std::size_t>(O * E));
  gemm_rm<T>(h, true, false, O, E, rows, dz.get(), O, e, E, T(0), dwt.get(), E);
  cuda_for_each(dev, O * E, AddToDouble<T>{dw, dwt.get()}, "edge_conv_dw");
  cuda_group_reduce(dev, O, rows, ColumnSums<T>{dz.get(), O, db}, "edge_conv_db");
}

}  // namespace

void cuda::edge_conv_forward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                             const std::int64_t* ids, const void* w, const void* b, void* z,
                             void* y, std::int64_t* argmax) {
  dispatch(t, [&](auto x) {
    using T = decltype(x);
    forward(dev, s, static_cast<const T*>(edges), ids, static_cast<const T*>(w),
            static_cast<const T*>(b), static_cast<T*>(z), static_cast<T*>(y), argmax);
  });
}

void cuda::edge_conv_backward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                              const std::int64_t* ids, const void* w, const void* z,
                              const std::int64_t* argmax, const void* dy, void* dedges, double* dw,
                              double* db) {
  dispatch(t, [&](auto x) {
    using T = decltype(x);
    backward(dev, s, static_cast<const T*>(edges), ids, static_cast<const T*>(w),
             static_cast<const T*>(z), argmax, static_cast<const T*>(dy), static_cast<T*>(dedges),
             dw, db);
  });
}

}  // namespace tessera::kernels
