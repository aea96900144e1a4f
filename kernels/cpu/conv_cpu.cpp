// conv_*_cpu: float32 through oneDNN, float64 through the direct loops.
#include "decomp/error.hpp"
#include "kernels/conv.hpp"
#include "kernels/cpu/conv_direct.hpp"
#include "kernels/cpu/conv_dnnl.hpp"

namespace tessera::kernels {
namespace {
void check_pointers(const char* where, std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (!p) throw Error(std::string(where) + ": null tensor pointer");
}
}  // namespace

void cpu::conv_forward(const ConvDesc& c, const void* x, const void* w, const void* bias, void* y) {
  c.validate();
  check_pointers("conv_forward_cpu", {x, w, y});
  if (c.type == DType::f32)
    dnnl_conv::forward(c, static_cast<const float*>(x), static_cast<const float*>(w),
                       static_cast<const float*>(bias), static_cast<float*>(y));
  else
    direct::forward(c, static_cast<const double*>(x), static_cast<const double*>(w),
                    static_cast<const double*>(bias), static_cast<double*>(y));
}

void cpu::conv_backward_data(const ConvDesc& c, const void* dy, const void* w, void* dx) {
  c.validate();
  check_pointers("conv_backward_data_cpu", {dy, w, dx});
  if (c.type == DType::f32)
    dnnl_conv::backward_data(c, static_cast<const float*>(dy), static_cast<const float*>(w),
                             static_cast<float*>(dx));
  else
    direct::backward_data(c, static_cast<const double*>(dy), static_cast<const double*>(w),
                          static_cast<double*>(dx));
}

void cpu::conv_backward_weights(const ConvDesc& c, const void* x, const void* dy, void* dw,
                                void* dbias) {
  c.validate();
  check_pointers("conv_backward_weights_cpu", {x, dy, dw});
  if (c.type == DType::f32)
    dnnl_conv::backward_weights(c, static_cast<const float*>(x), static_cast<const float*>(dy),
                                static_cast<float*>(dw), static_cast<float*>(dbias));
  else
    direct::backward_weights(c, static_cast<const double*>(x), static_cast<const double*>(dy),
                             static_cast<double*>(dw), static_cast<double*>(dbias));
}

}  // namespace tessera::kernels
