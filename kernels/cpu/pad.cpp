// Padding on the host: OpenMP loops over the element functions of kernels/pad_impl.hpp,
// with each dim's sources (forward) and readers (backward) tabulated once per call, so a
// cell costs three table reads instead of three index computations.
#include <vector>

#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/pad_impl.hpp"

namespace tessera::kernels {
namespace {

template <class T>
struct PadForwardTabled {
  PadForward<T> f;
  std::vector<Index> src[3];  // per output cell of the window: its source, or kPadConstant
  explicit PadForwardTabled(const PadForward<T>& p) : f(p) {
    const PadGeom& g = f.g;
    for (int d = 0; d < 3; ++d)
      for (Index k = 0; k < g.on[d]; ++k)
        src[d].push_back(pad_source(g.mode, g.g[d], g.plo[d], g.olo[d] + k));
  }
  void at(Index i, Index nn, Index cc, const Index o[3]) const {
    Index p[3];
    for (int d = 0; d < 3; ++d) {
      p[d] = src[d][static_cast<std::size_t>(o[d] - f.g.olo[d])];
      if (p[d] == kPadConstant) {
        f.y[i] = static_cast<T>(f.g.value);
        return;
      }
    }
    f.y[i] = f.x[f.g.x_offset(nn, cc, p)];
  }
};

// The backward with, per dim and input cell, the outputs of the window that copy it (offsets
// within the window), in the functor's order: the same sums.
template <class T>
struct PadBackwardTabled {
  PadBackward<T> f;
  DimReaders r[3];  // weights 1
  explicit PadBackwardTabled(const PadBackward<T>& b)
      : f(b), r{readers(b.g, 0), readers(b.g, 1), readers(b.g, 2)} {}
  static DimReaders readers(const PadGeom& g, int d) {
    return DimReaders(g.in[d], [&g, d](Index pl, const auto& add) {
      Index lo[3], hi[3];
      const int runs = pad_readers(g.mode, g.g[d], g.plo[d], g.phi[d], g.ilo[d] + pl, lo, hi);
      for (int k = 0; k < runs; ++k)
        for (Index o = max_i(lo[k], g.olo[d]); o < min_i(hi[k], g.olo[d] + g.on[d]); ++o)
          add(o - g.olo[d], 1.0);
    });
  }
  void at(Index, Index nn, Index cc, const Index p[3]) const {
    const PadGeom& g = f.g;
    const Index q[3] = {p[0] - g.ilo[0], p[1] - g.ilo[1], p[2] - g.ilo[2]};
    const T* dync = f.dy + (nn * g.c + cc) * g.on[0] * g.on[1] * g.on[2];
    double acc = 0;
    for (std::size_t a = r[0].begin(q[0]); a < r[0].end(q[0]); ++a)
      for (std::size_t b = r[1].begin(q[1]); b < r[1].end(q[1]); ++b)
        for (std::size_t e = r[2].begin(q[2]); e < r[2].end(q[2]); ++e)
          acc += static_cast<double>(
              dync[(r[0].out[a] * g.on[1] + r[1].out[b]) * g.on[2] + r[2].out[e]]);
    f.dx[g.x_offset(nn, cc, p)] = static_cast<T>(acc);
  }
};

}  // namespace

void cpu::pad_forward(const PadDesc& d, const void* x, void* y) {
  const PadGeom g = pad_geometry(d, "pad_forward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_nc3(
        g.n, g.c, g.on, g.olo,
        PadForwardTabled<T>(PadForward<T>{g, static_cast<const T*>(x), static_cast<T*>(y)}));
  });
}

void cpu::pad_backward(const PadDesc& d, const void* dy, void* dx) {
  const PadGeom g = pad_geometry(d, "pad_backward_cpu");
  dispatch(d.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_nc3(
        g.n, g.c, g.in, g.ilo,
        PadBackwardTabled<T>(PadBackward<T>{g, static_cast<const T*>(dy), static_cast<T*>(dx)}));
  });
}

}  // namespace tessera::kernels
