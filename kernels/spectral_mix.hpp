#pragma once
// Per-mode channel mixing of a spectral (FNO) convolution: for every retained Fourier mode
// m, a complex (batch x c_in) x (c_in x c_out) product - a batched complex GEMM whose batch
// is the mode, which runs contiguous in memory (the spectrum's layout (batch, c, modes...)
// flattened). Its backward is the two adjoint products. complex64 or complex128 operands.
#include "kernels/floor.hpp"
#include "decomp/dtype.hpp"
#include "decomp/index.hpp"
#include "kernels/device/device.hpp"

namespace tessera::kernels {

struct MixShape {
  Index batch = 0, cin = 0, cout = 0, modes = 0;
};

// out[n, o, m] = sum_i x[n, i, m] * w[i, o, m]
void spectral_mix(const Device& dev, DType cplx, const MixShape& s, const void* x, const void* w,
                  void* out);
// dx[n, i, m] = sum_o dy[n, o, m] * conj(w[i, o, m])
void spectral_mix_dx(const Device& dev, DType cplx, const MixShape& s, const void* dy,
                     const void* w, void* dx);
// dw[i, o, m] += sum_n conj(x[n, i, m]) * dy[n, o, m]
void spectral_mix_dw(const Device& dev, DType cplx, const MixShape& s, const void* x,
                     const void* dy, void* dw);

// How the CUDA products run: the own kernel (one thread per output, modes coalesced; the
// default, verified on an H200) or cuBLAS strided-batched complex GEMMs over the modes, the
// operands transposed to modes-outer and back by cuBLAS geam (three transposes a call: a
// per-mode matrix has no unit stride in the spectrum's layout). The environment's
// TESSERA_SPECTRAL_MIX=kernel|gemm sets the first value; the host ignores it.
enum class CudaMixPath { Kernel, Gemm };
CudaMixPath cuda_mix_path();
void set_cuda_mix_path(CudaMixPath p);

namespace cpu {
void spectral_mix(DType cplx, const MixShape& s, const void* x, const void* w, void* out);
void spectral_mix_dx(DType cplx, const MixShape& s, const void* dy, const void* w, void* dx);
void spectral_mix_dw(DType cplx, const MixShape& s, const void* x, const void* dy, void* dw);
}  // namespace cpu
namespace cuda {
void spectral_mix(const Device& dev, DType cplx, const MixShape& s, const void* x, const void* w,
                  void* out);
void spectral_mix_dx(const Device& dev, DType cplx, const MixShape& s, const void* dy,
                     const void* w, void* dx);
void spectral_mix_dw(const Device& dev, DType cplx, const MixShape& s, const void* x,
                     const void* dy, void* dw);
}  // namespace cuda

}  // namespace tessera::kernels
