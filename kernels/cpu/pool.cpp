// Pooling on the host: OpenMP loops over the element functions of kernels/pool_impl.hpp.
#include <vector>

#include "decomp/error.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/pool_impl.hpp"

namespace tessera::kernels {
namespace {

// The backward's covering outputs per dim and input cell, tabulated once per call (the
// functor divides for them per cell).
template <class T>
struct PoolBackwardTabled {
  PoolBackward<T> f;
  std::vector<Index> lo[3], hi[3];
  explicit PoolBackwardTabled(const PoolBackward<T>& b) : f(b) {
    for (int d = 0; d < 3; ++d) {
      lo[d].resize(static_cast<std::size_t>(f.g.in[d]));
      hi[d].resize(lo[d].size());
      for (Index p = 0; p < f.g.in[d]; ++p)
        f.covering(d, p, lo[d][static_cast<std::size_t>(p)], hi[d][static_cast<std::size_t>(p)]);
    }
  }
  void at(Index, Index nn, Index cc, const Index p[3]) const {
    Index olo[3], ohi[3];
    for (int d = 0; d < 3; ++d) {
      olo[d] = lo[d][static_cast<std::size_t>(p[d])];
      ohi[d] = hi[d][static_cast<std::size_t>(p[d])];
    }
    f.at_range(nn, cc, p, olo, ohi);
  }
};

}  // namespace

void cpu::pool_forward(const PoolDesc& d, const void* x, void* y) {
  const PoolGeom g = pool_geometry(d, "pool_forward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_nc3(g.n, g.c, g.out, nullptr,
                      PoolForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)});
  });
}

void cpu::pool_backward(const PoolDesc& d, const void* x, const void* dy, void* dx) {
  const PoolGeom g = pool_geometry(d, "pool_backward_cpu");
  TESSERA_CHECK(x || !g.max, "pool_backward_cpu: max pooling needs x");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    std::vector<Index> arg(g.max ? static_cast<std::size_t>(g.out_count()) : 0);
    if (g.max)
      host_for_each_nc3(g.n, g.c, g.out, nullptr,
                        PoolArgmax<T>{g, static_cast<const T*>(x), arg.data()});
    host_for_each_nc3(g.n, g.c, g.in, nullptr,
                      PoolBackwardTabled<T>(PoolBackward<T>{
                          g, arg.data(), static_cast<const T*>(dy), static_cast<T*>(dx)}));
  });
}

}  // namespace tessera::kernels
