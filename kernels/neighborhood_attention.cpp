// Entry points of kernels/neighborhood_attention.hpp (host only so far).
#include "kernels/neighborhood_attention.hpp"

#include "decomp/error.hpp"

namespace tessera::kernels {
namespace {
void check(const Device& dev, const NeighborhoodDesc& d, const char* what) {
  TESSERA_CHECK(dev.is_host(), what << ": neighbourhood attention runs on the host only so far");
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
  cpu::neighborhood_attention_forward(d, q, kv, out, lse);
}

void neighborhood_attention_backward(const Device& dev, const NeighborhoodDesc& d, const void* q,
                                     const void* kv, const void* out, const void* dout,
                                     const double* lse, void* dq, void* dkv) {
  check(dev, d, "neighborhood_attention_backward");
  cpu::neighborhood_attention_backward(d, q, kv, out, dout, lse, dq, dkv);
}

}  // namespace tessera::kernels
