// Pooling on the host: OpenMP loops over the element functions of kernels/pool_impl.hpp.
#include <vector>

#include "decomp/error.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/pool_impl.hpp"

namespace tessera::kernels {

void cpu::pool_forward(const PoolDesc& d, const void* x, void* y) {
  const PoolGeom g = pool_geometry(d, "pool_forward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each(g.out_count(), PoolForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)});
  });
}

void cpu::pool_backward(const PoolDesc& d, const void* x, const void* dy, void* dx) {
  const PoolGeom g = pool_geometry(d, "pool_backward_cpu");
  TESSERA_CHECK(x || !g.max, "pool_backward_cpu: max pooling needs x");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    std::vector<Index> arg(g.max ? static_cast<std::size_t>(g.out_count()) : 0);
    if (g.max) host_for_each(g.out_count(), PoolArgmax<T>{g, static_cast<const T*>(x), arg.data()});
    host_for_each(g.in_count(),
                  PoolBackward<T>{g, arg.data(), static_cast<const T*>(dy), static_cast<T*>(dx)});
  });
}

}  // namespace tessera::kernels
