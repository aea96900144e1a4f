// Entry points of kernels/neighborhood_attention.hpp: one per op, dispatched on the device.
#include "kernels/neighborhood_attention.hpp"

#include "decomp/error.hpp"

namespace tessera::kernels {
namespace {
void check(const Device& dev, const NeighborhoodDesc& d, const char* what) {
  (void)dev;
  TESSERA_CHECK(d.type == DType::f32 || d.type == DType::f64,
                what << " takes float32 or float64, not " << name_of(d.type));
  TESSERA_CHECK(d.nd >= 1 && d.nd <= 3 && d.heads >= 1 && d.dim >= 1, what << ": bad shape");
  for (int i = 0; i < d.nd; ++i)
    TESSERA_CHECK(
        d.kernel[i] >= 1 && d.dilation[i] >= 1 && d.extent[i] / d.dilation[i] >= d.kernel[i],
        what << ": dim " << i << " of " << d.extent[i] << " cells is too small for " << d.kernel[i]
             << " keys at dilation " << d.dilation[i]);
}
}  // namespace

void neighborhood_attention_forward(const Device& dev, const NeighborhoodDesc& d, const void* q,
                                    const void* kv, void* out, double* lse) {
  check(dev, d, "neighborhood_attention_forward");
  if (dev.is_host()) return cpu::neighborhood_attention_forward(d, q, kv, out, lse);
  if constexpr (kCudaEnabled) return cuda::neighborhood_attention_forward(dev, d, q, kv, out, lse);
  throw_without_cuda("neighborhood_attention_forward");
}

void neighborhood_attention_backward(const Device& dev, const NeighborhoodDesc& d, const void* q,
                                     const void* kv, const void* out, const void* dout,
                                     const double* lse, void* dq, void* dkv) {
  check(dev, d, "neighborhood_attention_backward");
  if (dev.is_host()) return cpu::neighborhood_attention_backward(d, q, kv, out, dout, lse, dq, dkv);
  if constexpr (kCudaEnabled)
    return cuda::neighborhood_attention_backward(dev, d, q, kv, out, dout, lse, dq, dkv);
  throw_without_cuda("neighborhood_attention_backward");
}

}  // namespace tessera::kernels
