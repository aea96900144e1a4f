// Upsampling on the host: OpenMP loops over the element functions of kernels/upsample_impl.hpp.
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/upsample_impl.hpp"

namespace tessera::kernels {

void cpu::upsample_forward(const UpsampleDesc& d, const void* x, void* y) {
  const UpsampleGeom g = upsample_geometry(d, "upsample_forward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each(g.out_count(),
                  UpsampleForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)});
  });
}

void cpu::upsample_backward(const UpsampleDesc& d, const void* dy, void* dx) {
  const UpsampleGeom g = upsample_geometry(d, "upsample_backward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each(g.in_count(),
                  UpsampleBackward<T>{g, static_cast<const T*>(dy), static_cast<T*>(dx)});
  });
}

}  // namespace tessera::kernels
