// Entry points of kernels/spectral_mix.hpp: one per op, dispatched once on the device.
#include "kernels/spectral_mix.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

#include "decomp/error.hpp"
#include "kernels/env_choice.hpp"

namespace tessera::kernels {
namespace {
std::atomic<int>& path_slot() {
  static std::atomic<int> p{env_choice("TESSERA_SPECTRAL_MIX", {"kernel", "gemm"})};
  return p;
}
bool check(DType t, const MixShape& s, const char* what) {
  TESSERA_CHECK(is_complex(t), what << " takes complex64 or complex128, not " << name_of(t));
  TESSERA_CHECK(s.batch >= 0 && s.cin >= 0 && s.cout >= 0 && s.modes >= 0,
                what << ": negative extent");
  return s.modes > 0;
}
}  // namespace

CudaMixPath cuda_mix_path() {
  return static_cast<CudaMixPath>(path_slot().load());
}
void set_cuda_mix_path(CudaMixPath p) {
  path_slot().store(static_cast<int>(p));
}

void spectral_mix(const Device& dev, DType t, const MixShape& s, const void* x, const void* w,
                  void* out) {
  if (!check(t, s, "spectral_mix") || s.batch * s.cout == 0) return;
  if (dev.is_host()) return cpu::spectral_mix(t, s, x, w, out);
  if constexpr (kCudaEnabled) return cuda::spectral_mix(dev, t, s, x, w, out);
  throw_without_cuda("spectral_mix");
}

void spectral_mix_dx(const Device& dev, DType t, const MixShape& s, const void* dy, const void* w,
                     void* dx) {
  if (!check(t, s, "spectral_mix_dx") || s.batch * s.cin == 0) return;
  if (dev.is_host()) return cpu::spectral_mix_dx(t, s, dy, w, dx);
  if constexpr (kCudaEnabled) return cuda::spectral_mix_dx(dev, t, s, dy, w, dx);
  throw_without_cuda("spectral_mix_dx");
}

void spectral_mix_dw(const Device& dev, DType t, const MixShape& s, const void* x, const void* dy,
                     void* dw) {
  if (!check(t, s, "spectral_mix_dw") || s.cin * s.cout == 0) return;
  if (dev.is_host()) return cpu::spectral_mix_dw(t, s, x, dy, dw);
  if constexpr (kCudaEnabled) return cuda::spectral_mix_dw(dev, t, s, x, dy, dw);
  throw_without_cuda("spectral_mix_dw");
}

}  // namespace tessera::kernels
