// Padding on the host: OpenMP loops over the element functions of kernels/pad_impl.hpp.
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/pad_impl.hpp"

namespace tessera::kernels {

void cpu::pad_forward(const PadDesc& d, const void* x, void* y) {
  const PadGeom g = pad_geometry(d, "pad_forward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_nc3(g.n, g.c, g.on, g.olo,
                      PadForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)});
  });
}

void cpu::pad_backward(const PadDesc& d, const void* dy, void* dx) {
  const PadGeom g = pad_geometry(d, "pad_backward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_nc3(g.n, g.c, g.in, g.ilo,
                      PadBackward<T>{g, static_cast<const T*>(dy), static_cast<T*>(dx)});
  });
}

}  // namespace tessera::kernels
