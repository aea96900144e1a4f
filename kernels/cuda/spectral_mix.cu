// CUDA spectral mixing: one thread per output element (consecutive threads take consecutive
// modes, so loads coalesce), reducing over the contracted channel or batch in a fixed order.
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

}  // namespace

void cuda::spectral_mix(const Device& dev, DType t, const MixShape& s, const void* x, const void* w,
                        void* out) {
  const Index M = s.modes;
  // out[n, o] = sum_i x[n, i] w[i, o]
  run(dev, t, Product{s.batch, s.cout, s.cin, M, s.cin * M, M, s.cout * M, M, false, false, false},
      x, w, out);
}

void cuda::spectral_mix_dx(const Device& dev, DType t, const MixShape& s, const void* dy,
                           const void* w, void* dx) {
  const Index M = s.modes;
  // dx[n, i] = sum_o dy[n, o] conj(w[i, o]): B[k = o, c = i] = w[i, o]
  run(dev, t, Product{s.batch, s.cin, s.cout, M, s.cout * M, M, M, s.cout * M, false, true, false},
      dy, w, dx);
}

void cuda::spectral_mix_dw(const Device& dev, DType t, const MixShape& s, const void* x,
                           const void* dy, void* dw) {
  const Index M = s.modes;
  // dw[i, o] += sum_n conj(x[n, i]) dy[n, o]: A[r = i, k = n] = x[n, i]
  run(dev, t, Product{s.cin, s.cout, s.batch, M, M, s.cin * M, s.cout * M, M, true, false, true}, x,
      dy, dw);
}

}  // namespace tessera::kernels
