#pragma once
// Test support for the convolution kernels: a naive float64 reference written straight
// from the definition (an N-d loop over every output and every kernel tap), a sweep of
// descriptors, and strided (windowed) tensors. Shared by the CPU and GPU tests.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/conv.hpp"

namespace tessera::test_conv {

using kernels::ConvDesc;

inline std::size_t sz(Index i) {
  return static_cast<std::size_t>(i);
}

// Calls f(out_index[], tap[], x_index[]) for every output element and kernel tap whose
// input position lies inside x (taps in the padding contribute zero and are skipped).
template <class F>
void for_each_tap(const ConvDesc& c, F f) {
  Index o[3] = {0, 0, 0}, k[3] = {0, 0, 0}, i[3] = {0, 0, 0};
  Index out_vol = 1, k_vol = 1;
  for (int d = 0; d < c.nd; ++d) out_vol *= c.out(d), k_vol *= c.kernel[d];
  for (Index oi = 0; oi < out_vol; ++oi) {
    Index r = oi;
    for (int d = c.nd - 1; d >= 0; --d) o[d] = r % c.out(d), r /= c.out(d);
    for (Index ki = 0; ki < k_vol; ++ki) {
      Index q = ki;
      bool inside = true;
      for (int d = c.nd - 1; d >= 0; --d) {
        k[d] = q % c.kernel[d], q /= c.kernel[d];
        i[d] = o[d] * c.stride[d] - c.pad_lo[d] + k[d] * c.dilation[d];
        inside = inside && i[d] >= 0 && i[d] < c.in[d];
      }
      if (inside) f(oi, ki, i);
    }
  }
}

// Offsets into x (with its strides), y and w.
inline Index x_off(const ConvDesc& c, Index n, Index ci, const Index* i) {
  Index s[5];
  c.x_strides_or_dense(s);
  Index off = n * s[0] + ci * s[1];
  for (int d = 0; d < c.nd; ++d) off += i[d] * s[2 + d];
  return off;
}
inline Index out_vol(const ConvDesc& c) {
  Index v = 1;
  for (int d = 0; d < c.nd; ++d) v *= c.out(d);
  return v;
}
inline Index k_vol(const ConvDesc& c) {
  Index v = 1;
  for (int d = 0; d < c.nd; ++d) v *= c.kernel[d];
  return v;
}

// y = conv(x, w) + bias, in float64. x is addressed with c's strides.
inline std::vector<double> ref_forward(const ConvDesc& c, const std::vector<double>& x,
                                       const std::vector<double>& w, const double* bias) {
  const Index ov = out_vol(c), kv = k_vol(c), cig = c.c_in / c.groups, cog = c.c_out / c.groups;
  std::vector<double> y(static_cast<std::size_t>(c.n * c.c_out * ov), 0.0);
  for (Index n = 0; n < c.n; ++n)
    for (Index co = 0; co < c.c_out; ++co) {
      double* yp = &y[static_cast<std::size_t>((n * c.c_out + co) * ov)];
      if (bias)
        for (Index j = 0; j < ov; ++j) yp[j] = bias[co];
      for (Index cg = 0; cg < cig; ++cg) {
        const Index ci = (co / cog) * cig + cg;
        for_each_tap(c, [&](Index oi, Index ki, const Index* i) {
          yp[oi] += w[static_cast<std::size_t>((co * cig + cg) * kv + ki)] *
                    x[static_cast<std::size_t>(x_off(c, n, ci, i))];
        });
      }
    }
  return y;
}

// dx (in a buffer of dx_size elements with c's strides; other elements stay 0).
inline std::vector<double> ref_backward_data(const ConvDesc& c, const std::vector<double>& dy,
                                             const std::vector<double>& w, Index dx_size) {
  const Index ov = out_vol(c), kv = k_vol(c), cig = c.c_in / c.groups, cog = c.c_out / c.groups;
  std::vector<double> dx(static_cast<std::size_t>(dx_size), 0.0);
  for (Index n = 0; n < c.n; ++n)
    for (Index co = 0; co < c.c_out; ++co)
      for (Index cg = 0; cg < cig; ++cg) {
        const Index ci = (co / cog) * cig + cg;
        for_each_tap(c, [&](Index oi, Index ki, const Index* i) {
          dx[static_cast<std::size_t>(x_off(c, n, ci, i))] +=
              w[static_cast<std::size_t>((co * cig + cg) * kv + ki)] *
              dy[static_cast<std::size_t>((n * c.c_out + co) * ov + oi)];
        });
      }
  return dx;
}

// dw and dbias.
inline void ref_backward_weights(const ConvDesc& c, const std::vector<double>& x,
                                 const std::vector<double>& dy, std::vector<double>& dw,
                                 std::vector<double>& db) {
  const Index ov = out_vol(c), kv = k_vol(c), cig = c.c_in / c.groups, cog = c.c_out / c.groups;
  dw.assign(static_cast<std::size_t>(c.w_elems()), 0.0);
  db.assign(static_cast<std::size_t>(c.c_out), 0.0);
  for (Index n = 0; n < c.n; ++n)
    for (Index co = 0; co < c.c_out; ++co) {
      for (Index j = 0; j < ov; ++j)
        db[static_cast<std::size_t>(co)] +=
            dy[static_cast<std::size_t>((n * c.c_out + co) * ov + j)];
      for (Index cg = 0; cg < cig; ++cg) {
        const Index ci = (co / cog) * cig + cg;
        for_each_tap(c, [&](Index oi, Index ki, const Index* i) {
          dw[static_cast<std::size_t>((co * cig + cg) * kv + ki)] +=
              dy[static_cast<std::size_t>((n * c.c_out + co) * ov + oi)] *
              x[static_cast<std::size_t>(x_off(c, n, ci, i))];
        });
      }
    }
}

// Gives c a windowed x: x sits inside a buffer with `margin` extra cells on each side
// of every dim (channels and batch included), like a halo-padded shard. Returns the
// buffer size and the offset of x's element 0.
struct Window {
  Index size = 0, offset = 0;
};
inline Window make_windowed(ConvDesc& c, Index margin) {
  Index ext[5] = {c.n, c.c_in, c.in[0], c.in[1], c.in[2]};
  const int r = c.nd + 2;
  Index acc = 1, off = 0;
  for (int d = r - 1; d >= 0; --d) {
    c.x_strides[d] = acc;
    off += margin * acc;
    acc *= ext[d] + 2 * margin;
  }
  return {acc, off};
}
inline Window dense_window(const ConvDesc& c) {
  return {c.x_elems(), 0};
}

// The sweep: 1-D/2-D/3-D; stride 1..3; kernel 1..5 (odd and even); dilation 1, 2;
// groups 1, 2, 4, depthwise, and depthwise with a channel multiplier; asymmetric
// padding; batch 1 and 2; every other case with a windowed x. Extents, strides,
// dilations and pads differ per dim so a transposed dim cannot pass.
struct SweepCase {
  ConvDesc c;
  Index margin;  // 0: contiguous x
};
inline std::vector<SweepCase> sweep(DType type) {
  std::vector<SweepCase> v;
  int id = 0;
  for (int nd = 1; nd <= 3; ++nd)
    for (Index s = 1; s <= 3; ++s)
      for (Index k = 1; k <= 5; ++k)
        for (Index dl = 1; dl <= 2; ++dl)
          for (int gm = 0; gm < 5; ++gm, ++id) {
            if (nd == 3 && (id % 2)) continue;  // halve the 3-D cases: they cost the most
            ConvDesc c;
            c.nd = nd;
            c.type = type;
            c.n = 1 + id % 2;
            const Index cin[5] = {3, 4, 8, 4, 4}, cout[5] = {5, 6, 4, 4, 8}, g[5] = {1, 2, 4, 4, 4};
            c.c_in = cin[gm], c.c_out = cout[gm], c.groups = g[gm];
            for (int d = 0; d < nd; ++d) {
              c.kernel[d] = 1 + (k - 1 + d) % 5;
              c.stride[d] = 1 + (s - 1 + d) % 3;
              c.dilation[d] = d % 2 ? 3 - dl : dl;
              c.pad_lo[d] = (id + d) % 3;
              c.pad_hi[d] = (id + 2 * d + 1) % 4;
              const Index span = c.dilation[d] * (c.kernel[d] - 1) + 1;
              const Index extra = nd == 3 ? (id + d) % 3 : 2 + (id + 3 * d) % 7;
              c.in[d] = std::max<Index>(1, span - c.pad_lo[d] - c.pad_hi[d] + c.stride[d] + extra);
            }
            v.push_back({c, (id % 2) ? Index(2) : Index(0)});
          }
  return v;
}

// The smallest per-call limit under which c still runs, in slabs of `rows` output rows of
// its first spatial dim: the window those rows read (padding counted) and their output.
inline Index slab_limit(const ConvDesc& c, Index rows) {
  Index in_row = c.c_in, out_row = c.c_out;
  for (int d = 1; d < c.nd; ++d) in_row *= c.in[d] + c.pad_lo[d] + c.pad_hi[d], out_row *= c.out(d);
  const Index reach = c.dilation[0] * (c.kernel[0] - 1) + 1;
  return std::max(in_row * ((rows - 1) * c.stride[0] + reach), out_row * rows);
}

// The limit that holds one sample (padding counted; a windowed x may still need slabs).
inline Index sample_limit(const ConvDesc& c) {
  Index x = c.c_in;
  for (int d = 0; d < c.nd; ++d) x *= c.in[d] + c.pad_lo[d] + c.pad_hi[d];
  return std::max(x, c.y_elems() / c.n);
}

inline std::vector<double> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& e : v) e = u(gen);
  return v;
}

template <class T, class U>
std::vector<T> cast(const std::vector<U>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// max |a - b| / max(max |b|, tiny): a norm-wise relative error.
template <class T>
double rel_error(const std::vector<T>& a, const std::vector<double>& b) {
  double err = 0, scale = 1e-300;
  for (std::size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

}  // namespace tessera::test_conv
