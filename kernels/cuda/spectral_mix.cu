// CUDA spectral mixing: one thread per output element (consecutive threads take consecutive
// modes, so loads coalesce), reducing over the contracted channel or batch in a fixed order;
// or (CudaMixPath::Gemm) cuBLAS strided-batched complex GEMMs, one matrix per mode, on
// operands transposed to modes-outer by cuBLAS geam.
#include <cuComplex.h>

#include <limits>
#include <type_traits>

#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/spectral_mix.hpp"

namespace tessera::kernels {
namespace {

// Each output (r, c, m) = sum_k A[r, k, m] (*) B[k, c, m] for the three products, with the
// operand strides and conjugations of each passed in.
struct Product {
  Index rows, cols, depth, modes;
  Index a_row, a_k, b_k, b_col;  // strides in complex elements (modes are stride 1)
  bool conj_a, conj_b, accumulate;
};

template <class R>
__global__ void product_kernel(Product p, const R* a, const R* b, R* out) {
  const Index total = p.rows * p.cols * p.modes;
  for (Index t = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index m = t % p.modes, rc = t / p.modes, c = rc % p.cols, r = rc / p.cols;
    R re = 0, im = 0;
    for (Index k = 0; k < p.depth; ++k) {
      const Index ia = 2 * (r * p.a_row + k * p.a_k + m), ib = 2 * (k * p.b_k + c * p.b_col + m);
      const R ar = a[ia], ai = p.conj_a ? -a[ia + 1] : a[ia + 1];
      const R br = b[ib], bi = p.conj_b ? -b[ib + 1] : b[ib + 1];
      re += ar * br - ai * bi;
      im += ar * bi + ai * br;
    }
    if (p.accumulate) {
      out[2 * t] += re;
      out[2 * t + 1] += im;
    } else {
      out[2 * t] = re;
      out[2 * t + 1] = im;
    }
  }
}

void run(const Device& dev, DType t, const Product& p, const void* a, const void* b, void* out) {
  const Index total = p.rows * p.cols * p.modes;
  if (t == DType::c128)
    product_kernel<double><<<cuda_blocks_for(total, 256), 256, 0, stream_of(dev)>>>(
        p, static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(out));
  else
    product_kernel<float><<<cuda_blocks_for(total, 256), 256, 0, stream_of(dev)>>>(
        p, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(out));
  check_launch("spectral mix");
}

// --- The GEMM path. Column-major views: a tensor (rows..., modes) with modes contiguous is
// the matrix (modes x K), K the product of the other extents; its transpose (K x modes) holds
// one block of K per mode - for x (N, C_in, M) the column-major (C_in x N) matrix X_m^T, for
// w (C_in, C_out, M) the (C_out x C_in) matrix W_m^T. Then per mode
//   Y^T = W^T X^T,  dX^T = (W^T)^H dY^T,  dW^T += dY^T (X^T)^H,
// and the results transposed back (dW's added into the gradient by the same geam).

int as_int(Index v, const char* what) {
  TESSERA_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(),
                what << ": extent " << v << " exceeds cuBLAS's int");
  return static_cast<int>(v);
}

template <class R>
using Cx = std::conditional_t<std::is_same_v<R, double>, cuDoubleComplex, cuComplex>;

// c (cols x rows, column-major) = transpose(a (rows x cols)) + beta c.
template <class R>
void transpose(cublasHandle_t h, cudaStream_t st, Index rows, Index cols, const R* a, R* c,
               double beta) {
  if (rows == 0 || cols == 0) return;
  const Cx<R> one{1, 0}, b{static_cast<R>(beta), 0};
  const auto* A = reinterpret_cast<const Cx<R>*>(a);
  auto* C = reinterpret_cast<Cx<R>*>(c);
  const int m = as_int(cols, "spectral mix transpose"), n = as_int(rows, "spectral mix transpose");
  if (beta == 0)  // C doubles as geam's B: zeros, so that 0 x B is 0 whatever C held
    TESSERA_CUDA_CHECK(
        cudaMemsetAsync(c, 0, static_cast<std::size_t>(rows * cols) * sizeof(Cx<R>), st));
  // C = op_T(A) + beta * C, with B = C (cuBLAS's in-place form: op(B) = N, ldb = ldc).
  if constexpr (std::is_same_v<R, double>)
    cublas_check(cublasZgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, &one, A, n, &b, C, m, C, m),
                 "cublasZgeam");
  else
    cublas_check(cublasCgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, &one, A, n, &b, C, m, C, m),
                 "cublasCgeam");
}

// Per mode (batch of `modes`), column-major: C = op(A) op(B), A (m x k) after op.
template <class R>
void gemm_modes(cublasHandle_t h, cublasOperation_t oa, cublasOperation_t ob, Index m, Index n,
                Index k, const R* a, Index lda, Index sa, const R* b, Index ldb, Index sb, R* c,
                Index ldc, Index sc, Index modes) {
  const Cx<R> one{1, 0}, zero{0, 0};
  const char* what = "spectral mix GEMM";
  const auto* A = reinterpret_cast<const Cx<R>*>(a);
  const auto* B = reinterpret_cast<const Cx<R>*>(b);
  auto* C = reinterpret_cast<Cx<R>*>(c);
  if constexpr (std::is_same_v<R, double>)
    cublas_check(
        cublasZgemmStridedBatched(h, oa, ob, as_int(m, what), as_int(n, what), as_int(k, what),
                                  &one, A, as_int(lda, what), sa, B, as_int(ldb, what), sb, &zero,
                                  C, as_int(ldc, what), sc, as_int(modes, what)),
        "cublasZgemmStridedBatched");
  else
    cublas_check(
        cublasCgemmStridedBatched(h, oa, ob, as_int(m, what), as_int(n, what), as_int(k, what),
                                  &one, A, as_int(lda, what), sa, B, as_int(ldb, what), sb, &zero,
                                  C, as_int(ldc, what), sc, as_int(modes, what)),
        "cublasCgemmStridedBatched");
}

// One product of the GEMM path: a and b (modes contiguous, ka and kb elements per mode)
// transposed to modes-outer, per mode C_m = op_a(A_m) op_b(B_m) (m x n, inner k, column-major
// with leading dimensions lda, ldb, ldc = m), and C (kc = m n per mode) transposed back into
// c (+ beta c). A sum of no terms (k = 0, which cuBLAS refuses as a leading dimension) writes
// zeros, or leaves c as it was when adding.
struct ModeGemm {
  cublasOperation_t oa, ob;
  Index m, n, k, lda, ldb;
};

template <class R>
void gemm_product(const Device& dev, Index modes, const R* a, Index ka, const R* b, Index kb, R* c,
                  double beta, const ModeGemm& g) {
  const Index kc = g.m * g.n;
  if (g.k == 0) {
    if (beta == 0)
      TESSERA_CUDA_CHECK(cudaMemsetAsync(c, 0, static_cast<std::size_t>(2 * kc * modes) * sizeof(R),
                                         stream_of(dev)));
    return;
  }
  const cublasHandle_t h = cublas_for(dev);
  const cudaStream_t st = stream_of(dev);
  DeviceScratch<R> at(static_cast<std::size_t>(2 * ka * modes)),
      bt(static_cast<std::size_t>(2 * kb * modes)), ct(static_cast<std::size_t>(2 * kc * modes));
  transpose(h, st, modes, ka, a, at.get(), 0);
  transpose(h, st, modes, kb, b, bt.get(), 0);
  gemm_modes(h, g.oa, g.ob, g.m, g.n, g.k, at.get(), g.lda, ka, bt.get(), g.ldb, kb, ct.get(), g.m,
             kc, modes);
  transpose(h, st, kc, modes, ct.get(), c, beta);
}

// Y^T = W^T X^T per mode: W^T (C_out x C_in), X^T (C_in x N).
template <class R>
void gemm_mix(const Device& dev, const MixShape& s, const R* x, const R* w, R* out) {
  const Index N = s.batch, Ci = s.cin, Co = s.cout;
  gemm_product(dev, s.modes, w, Ci * Co, x, N * Ci, out, 0,
               {CUBLAS_OP_N, CUBLAS_OP_N, Co, N, Ci, Co, Ci});
}

// dX^T = (W^T)^H dY^T per mode: dY^T (C_out x N).
template <class R>
void gemm_mix_dx(const Device& dev, const MixShape& s, const R* dy, const R* w, R* dx) {
  const Index N = s.batch, Ci = s.cin, Co = s.cout;
  gemm_product(dev, s.modes, w, Ci * Co, dy, N * Co, dx, 0,
               {CUBLAS_OP_C, CUBLAS_OP_N, Ci, N, Co, Co, Co});
}

// dW^T += dY^T (X^T)^H per mode, added into the gradient by the last transpose.
template <class R>
void gemm_mix_dw(const Device& dev, const MixShape& s, const R* x, const R* dy, R* dw) {
  const Index N = s.batch, Ci = s.cin, Co = s.cout;
  gemm_product(dev, s.modes, dy, N * Co, x, N * Ci, dw, 1,
               {CUBLAS_OP_N, CUBLAS_OP_C, Co, Ci, N, Co, Ci});
}

bool use_gemm() {
  return cuda_mix_path() == CudaMixPath::Gemm;
}

}  // namespace

void cuda::spectral_mix(const Device& dev, DType t, const MixShape& s, const void* x, const void* w,
                        void* out) {
  if (use_gemm()) {
    if (t == DType::c128)
      return gemm_mix(dev, s, static_cast<const double*>(x), static_cast<const double*>(w),
                      static_cast<double*>(out));
    return gemm_mix(dev, s, static_cast<const float*>(x), static_cast<const float*>(w),
                    static_cast<float*>(out));
  }
  const Index M = s.modes;
  // out[n, o] = sum_i x[n, i] w[i, o]
  run(dev, t, Product{s.batch, s.cout, s.cin, M, s.cin * M, M, s.cout * M, M, false, false, false},
      x, w, out);
}

void cuda::spectral_mix_dx(const Device& dev, DType t, const MixShape& s, const void* dy,
                           const void* w, void* dx) {
  if (use_gemm()) {
    if (t == DType::c128)
      return gemm_mix_dx(dev, s, static_cast<const double*>(dy), static_cast<const double*>(w),
                         static_cast<double*>(dx));
    return gemm_mix_dx(dev, s, static_cast<const float*>(dy), static_cast<const float*>(w),
                       static_cast<float*>(dx));
  }
  const Index M = s.modes;
  // dx[n, i] = sum_o dy[n, o] conj(w[i, o]): B[k = o, c = i] = w[i, o]
  run(dev, t, Product{s.batch, s.cin, s.cout, M, s.cout * M, M, M, s.cout * M, false, true, false},
      dy, w, dx);
}

void cuda::spectral_mix_dw(const Device& dev, DType t, const MixShape& s, const void* x,
                           const void* dy, void* dw) {
  if (use_gemm()) {
    if (t == DType::c128)
      return gemm_mix_dw(dev, s, static_cast<const double*>(x), static_cast<const double*>(dy),
                         static_cast<double*>(dw));
    return gemm_mix_dw(dev, s, static_cast<const float*>(x), static_cast<const float*>(dy),
                       static_cast<float*>(dw));
  }
  const Index M = s.modes;
  // dw[i, o] += sum_n conj(x[n, i]) dy[n, o]: A[r = i, k = n] = x[n, i]
  run(dev, t, Product{s.cin, s.cout, s.batch, M, M, s.cin * M, s.cout * M, M, true, false, true}, x,
      dy, dw);
}

}  // namespace tessera::kernels
