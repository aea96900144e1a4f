// Upsampling on the host: OpenMP loops over the element functions of kernels/upsample_impl.hpp.
#include <vector>

#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/upsample_impl.hpp"

namespace tessera::kernels {
namespace {

// The forward's taps per dim and output cell, tabulated once per call (upsample_tap
// divides per call).
template <class T>
struct UpsampleForwardTabled {
  UpsampleForward<T> f;
  std::vector<UpsampleTap> taps[3];
  explicit UpsampleForwardTabled(const UpsampleForward<T>& u) : f(u) {
    const UpsampleGeom& g = f.g;
    for (int d = 0; d < 3; ++d)
      for (Index k = 0; k < g.on[d]; ++k)
        taps[d].push_back(upsample_tap(g.mode, g.s[d], g.g[d], g.olo[d] + k));
  }
  void at(Index i, Index nn, Index cc, const Index o[3]) const {
    UpsampleTap t[3];
    for (int d = 0; d < 3; ++d) t[d] = taps[d][static_cast<std::size_t>(o[d] - f.g.olo[d])];
    f.at_taps(i, nn, cc, t);
  }
};

// The backward with, per dim and input cell, the outputs that read it with a nonzero
// weight and that weight (g.weight), in the functor's order: the same products and sums.
template <class T>
struct UpsampleBackwardTabled {
  UpsampleBackward<T> f;
  DimReaders r[3];
  explicit UpsampleBackwardTabled(const UpsampleBackward<T>& u)
      : f(u), r{readers(u.g, 0), readers(u.g, 1), readers(u.g, 2)} {}
  static DimReaders readers(const UpsampleGeom& g, int d) {
    return DimReaders(g.in[d], [&g, d](Index pl, const auto& add) {
      const Index p = g.ilo[d] + pl;
      Index lo, hi;
      g.readers(d, p, lo, hi);
      for (Index o = lo; o < hi; ++o) {
        const double wo = g.weight(d, o, p);
        if (wo != 0.0) add(o - g.olo[d], wo);
      }
    });
  }
  void at(Index, Index nn, Index cc, const Index p[3]) const {
    const UpsampleGeom& g = f.g;
    const Index q[3] = {p[0] - g.ilo[0], p[1] - g.ilo[1], p[2] - g.ilo[2]};
    const T* dync = f.dy + (nn * g.c + cc) * g.on[0] * g.on[1] * g.on[2];
    double acc = 0;
    for (std::size_t a = r[0].begin(q[0]); a < r[0].end(q[0]); ++a)
      for (std::size_t b = r[1].begin(q[1]); b < r[1].end(q[1]); ++b)
        for (std::size_t e = r[2].begin(q[2]); e < r[2].end(q[2]); ++e) {
          const Index off = (r[0].out[a] * g.on[1] + r[1].out[b]) * g.on[2] + r[2].out[e];
          acc += r[0].w[a] * r[1].w[b] * r[2].w[e] * static_cast<double>(dync[off]);
        }
    f.dx[g.x_offset(nn, cc, p)] = static_cast<T>(acc);
  }
};

}  // namespace

void cpu::upsample_forward(const UpsampleDesc& d, const void* x, void* y) {
  const UpsampleGeom g = upsample_geometry(d, "upsample_forward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_nc3(g.n, g.c, g.on, g.olo,
                      UpsampleForwardTabled<T>(
                          UpsampleForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)}));
  });
}

void cpu::upsample_backward(const UpsampleDesc& d, const void* dy, void* dx) {
  const UpsampleGeom g = upsample_geometry(d, "upsample_backward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_nc3(g.n, g.c, g.in, g.ilo,
                      UpsampleBackwardTabled<T>(
                          UpsampleBackward<T>{g, static_cast<const T*>(dy), static_cast<T*>(dx)}));
  });
}

}  // namespace tessera::kernels
