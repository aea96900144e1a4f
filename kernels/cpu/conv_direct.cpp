// Direct convolution loops. Every descriptor is lifted to 3-D (missing leading spatial
// dims get extent 1), so one loop nest serves 1-D, 2-D and 3-D. Each parallel task owns
// the output it writes (a y plane, a dx plane, a weight), so there are no races and the
// result does not depend on the thread count.
#include "kernels/cpu/conv_direct.hpp"

#include <algorithm>
#include <vector>

#include "kernels/hd_math.hpp"

namespace tessera::kernels::direct {
namespace {

struct Geo {
  Index n, ci, co, cig, cog;  // cig/cog: input/output channels per group
  Index in[3], k[3], s[3], dl[3], pl[3], out[3];
  Index xs[5];  // x strides (N, C, D, H, W)
  Index in_vol, out_vol, k_vol;
};

Geo lift(const ConvDesc& c) {
  c.validate();
  Geo g{};
  g.n = c.n, g.ci = c.c_in, g.co = c.c_out;
  g.cig = c.c_in / c.groups, g.cog = c.c_out / c.groups;
  Index xs[5];
  c.x_strides_or_dense(xs);
  g.xs[0] = xs[0], g.xs[1] = xs[1];
  const int lead = 3 - c.nd;
  for (int d = 0; d < 3; ++d) {
    const int s = d - lead;  // the descriptor's dim, or < 0 for a lifted one
    g.in[d] = s < 0 ? 1 : c.in[s];
    g.k[d] = s < 0 ? 1 : c.kernel[s];
    g.s[d] = s < 0 ? 1 : c.stride[s];
    g.dl[d] = s < 0 ? 1 : c.dilation[s];
    g.pl[d] = s < 0 ? 0 : c.pad_lo[s];
    g.out[d] = s < 0 ? 1 : c.out(s);
    g.xs[2 + d] = s < 0 ? 0 : xs[2 + s];
  }
  g.in_vol = g.in[0] * g.in[1] * g.in[2];
  g.out_vol = g.out[0] * g.out[1] * g.out[2];
  g.k_vol = g.k[0] * g.k[1] * g.k[2];
  return g;
}

// The outputs o in [lo, hi) whose input index o*s - pl + koff lies in [0, in).
struct Range {
  Index lo, hi;
};
Range valid(Index out, Index in, Index s, Index pl, Index koff) {
  const Index lo = std::max<Index>(0, -floor_div(koff - pl, s));  // ceil((pl-koff)/s)
  const Index hi = std::min<Index>(out, floor_div(in - 1 + pl - koff, s) + 1);
  return {lo, std::max(lo, hi)};
}

// What a row kernel needs for tap kw of the last dim; it does not depend on the row, so
// it is computed once per call. x rows are addressed as xr[base + ow*sx].
struct RowTap {
  Range r;
  Index base;  // may be < 0; base + r.lo*sx is not
};
std::vector<RowTap> row_taps(const Geo& g) {
  std::vector<RowTap> t(static_cast<std::size_t>(g.k[2]));
  for (Index kw = 0; kw < g.k[2]; ++kw)
    t[static_cast<std::size_t>(kw)] = {valid(g.out[2], g.in[2], g.s[2], g.pl[2], kw * g.dl[2]),
                                       (kw * g.dl[2] - g.pl[2]) * g.xs[4]};
  return t;
}

// Input index of output o at kernel tap k in dim d, or -1 when it falls in the padding.
Index tap(const Geo& g, int d, Index o, Index k) {
  const Index i = o * g.s[d] - g.pl[d] + k * g.dl[d];
  return i >= 0 && i < g.in[d] ? i : -1;
}

// The row kernels. x rows are addressed as xr[base + ow*sx] (base may be negative; the
// range r keeps every access inside the row); unit stride gets its own loop so it
// vectorizes, and the dot product is a SIMD reduction.
template <class T>
void axpy(T* y, T a, const T* xr, Index base, Index sx, Range r) {
  if (sx == 1) {
    for (Index ow = r.lo; ow < r.hi; ++ow) y[ow] += a * xr[base + ow];
  } else {
    for (Index ow = r.lo; ow < r.hi; ++ow) y[ow] += a * xr[base + ow * sx];
  }
}
template <class T>
void scatter_axpy(T* xr, Index base, Index sx, T a, const T* y, Range r) {
  if (sx == 1) {
    for (Index ow = r.lo; ow < r.hi; ++ow) xr[base + ow] += a * y[ow];
  } else {
    for (Index ow = r.lo; ow < r.hi; ++ow) xr[base + ow * sx] += a * y[ow];
  }
}
template <class T>
T dot(const T* y, const T* xr, Index base, Index sx, Range r) {
  T s = 0;
  if (sx == 1) {
#pragma omp simd reduction(+ : s)
    for (Index ow = r.lo; ow < r.hi; ++ow) s += y[ow] * xr[base + ow];
  } else {
#pragma omp simd reduction(+ : s)
    for (Index ow = r.lo; ow < r.hi; ++ow) s += y[ow] * xr[base + ow * sx];
  }
  return s;
}

}  // namespace

template <class T>
void forward(const ConvDesc& c, const T* x, const T* w, const T* bias, T* y) {
  const Geo g = lift(c);
  const std::vector<RowTap> taps = row_taps(g);
  const Index sx = g.s[2] * g.xs[4];
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < g.n; ++n)
    for (Index co = 0; co < g.co; ++co) {
      T* yp = y + (n * g.co + co) * g.out_vol;
      const Index ci0 = (co / g.cog) * g.cig;
      const T b = bias ? bias[co] : T(0);
      for (Index od = 0; od < g.out[0]; ++od)
        for (Index oh = 0; oh < g.out[1]; ++oh) {
          T* yr = yp + (od * g.out[1] + oh) * g.out[2];
          for (Index ow = 0; ow < g.out[2]; ++ow) yr[ow] = b;
          for (Index cg = 0; cg < g.cig; ++cg) {
            const T* xp = x + n * g.xs[0] + (ci0 + cg) * g.xs[1];
            const T* wp = w + (co * g.cig + cg) * g.k_vol;
            for (Index kd = 0; kd < g.k[0]; ++kd) {
              const Index id = tap(g, 0, od, kd);
              if (id < 0) continue;
              for (Index kh = 0; kh < g.k[1]; ++kh) {
                const Index ih = tap(g, 1, oh, kh);
                if (ih < 0) continue;
                const T* xr = xp + id * g.xs[2] + ih * g.xs[3];
                const T* wr = wp + (kd * g.k[1] + kh) * g.k[2];
                for (Index kw = 0; kw < g.k[2]; ++kw) {
                  const RowTap& t = taps[static_cast<std::size_t>(kw)];
                  axpy(yr, wr[kw], xr, t.base, sx, t.r);
                }
              }
            }
          }
        }
    }
}

template <class T>
void backward_data(const ConvDesc& c, const T* dy, const T* w, T* dx) {
  const Geo g = lift(c);
  const std::vector<RowTap> taps = row_taps(g);
  const Index sx = g.s[2] * g.xs[4];
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < g.n; ++n)
    for (Index ci = 0; ci < g.ci; ++ci) {
      T* xp = dx + n * g.xs[0] + ci * g.xs[1];
      const Index grp = ci / g.cig, cg = ci % g.cig;
      for (Index id = 0; id < g.in[0]; ++id)
        for (Index ih = 0; ih < g.in[1]; ++ih) {
          // Gather over dx rows, scatter within the row this task owns.
          T* xr = xp + id * g.xs[2] + ih * g.xs[3];
          for (Index iw = 0; iw < g.in[2]; ++iw) xr[iw * g.xs[4]] = T(0);
          for (Index kd = 0; kd < g.k[0]; ++kd) {
            const Index nd_ = id + g.pl[0] - kd * g.dl[0];
            if (nd_ < 0 || nd_ % g.s[0] != 0 || nd_ / g.s[0] >= g.out[0]) continue;
            const Index od = nd_ / g.s[0];
            for (Index kh = 0; kh < g.k[1]; ++kh) {
              const Index nh = ih + g.pl[1] - kh * g.dl[1];
              if (nh < 0 || nh % g.s[1] != 0 || nh / g.s[1] >= g.out[1]) continue;
              const Index oh = nh / g.s[1];
              for (Index kw = 0; kw < g.k[2]; ++kw) {
                const RowTap& t = taps[static_cast<std::size_t>(kw)];
                for (Index co = grp * g.cog; co < (grp + 1) * g.cog; ++co) {
                  const T wv =
                      w[((co * g.cig + cg) * g.k[0] + kd) * g.k[1] * g.k[2] + kh * g.k[2] + kw];
                  const T* yr = dy + (n * g.co + co) * g.out_vol + (od * g.out[1] + oh) * g.out[2];
                  scatter_axpy(xr, t.base, sx, wv, yr, t.r);
                }
              }
            }
          }
        }
    }
}

template <class T>
void backward_weights(const ConvDesc& c, const T* x, const T* dy, T* dw, T* dbias) {
  const Geo g = lift(c);
  const std::vector<RowTap> taps = row_taps(g);
  const Index sx = g.s[2] * g.xs[4];
#pragma omp parallel for collapse(2) schedule(static)
  for (Index co = 0; co < g.co; ++co)
    for (Index cg = 0; cg < g.cig; ++cg) {
      const Index ci = (co / g.cog) * g.cig + cg;
      // Row by row: one dy row serves every tap, one x row every kw; both stay in cache.
      std::vector<T> acc(static_cast<std::size_t>(g.k_vol), T(0));
      for (Index n = 0; n < g.n; ++n) {
        const T* xp = x + n * g.xs[0] + ci * g.xs[1];
        const T* yp = dy + (n * g.co + co) * g.out_vol;
        for (Index od = 0; od < g.out[0]; ++od)
          for (Index oh = 0; oh < g.out[1]; ++oh) {
            const T* yr = yp + (od * g.out[1] + oh) * g.out[2];
            for (Index kd = 0; kd < g.k[0]; ++kd) {
              const Index id = tap(g, 0, od, kd);
              if (id < 0) continue;
              for (Index kh = 0; kh < g.k[1]; ++kh) {
                const Index ih = tap(g, 1, oh, kh);
                if (ih < 0) continue;
                const T* xr = xp + id * g.xs[2] + ih * g.xs[3];
                T* ar = acc.data() + (kd * g.k[1] + kh) * g.k[2];
                for (Index kw = 0; kw < g.k[2]; ++kw) {
                  const RowTap& t = taps[static_cast<std::size_t>(kw)];
                  ar[kw] += dot(yr, xr, t.base, sx, t.r);
                }
              }
            }
          }
      }
      std::copy(acc.begin(), acc.end(), dw + (co * g.cig + cg) * g.k_vol);
    }
  if (!dbias) return;
#pragma omp parallel for schedule(static)
  for (Index co = 0; co < g.co; ++co) {
    T acc = 0;
    for (Index n = 0; n < g.n; ++n) {
      const T* yp = dy + (n * g.co + co) * g.out_vol;
      T part = 0;
#pragma omp simd reduction(+ : part)
      for (Index i = 0; i < g.out_vol; ++i) part += yp[i];
      acc += part;
    }
    dbias[co] = acc;
  }
}

#define TESSERA_CONV_DIRECT(T)                                                 \
  template void forward<T>(const ConvDesc&, const T*, const T*, const T*, T*); \
  template void backward_data<T>(const ConvDesc&, const T*, const T*, T*);     \
  template void backward_weights<T>(const ConvDesc&, const T*, const T*, T*, T*);
TESSERA_CONV_DIRECT(float)
TESSERA_CONV_DIRECT(double)
#undef TESSERA_CONV_DIRECT

}  // namespace tessera::kernels::direct
