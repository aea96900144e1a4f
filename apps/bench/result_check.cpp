#include "apps/bench/result_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "decomp/error.hpp"

namespace tessera::bench {

namespace {

// Running max |a - b| and max |b| of one result; or, for a sum, the largest sum of its
// terms' magnitudes (the bound of its rounding: a sum that cancels to near zero, as an
// attention output over oscillating values does, has errors of that size, not of its own).
// A result that is NaN or infinite is an error as large as can be (std::max drops a NaN,
// which made a kernel writing NaNs pass).
struct Err {
  double diff = 0, scale = 0;
  void add(double got, double want) { add(got, want, std::fabs(want)); }
  void add(double got, double want, double magnitude) {
    const double e = std::fabs(got - want);
    diff = std::isfinite(e) ? std::max(diff, e) : kWorstError;
    scale = std::max(scale, magnitude);
  }
  double rel() const {
    if (diff >= kWorstError) return kWorstError;
    return scale > 0 ? diff / scale : diff;
  }
};

}  // namespace

double rel_max_diff(const float* a, const float* b, std::size_t n) {
  Err e;
  for (std::size_t i = 0; i < n; ++i) e.add(a[i], b[i]);
  return e.rel();
}

double rel_max_diff(const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(a.shape() == b.shape() && a.dtype() == DType::f32 && b.dtype() == DType::f32,
                "result check: float32 tensors of one shape, not "
                    << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return rel_max_diff(ac.data<float>(), bc.data<float>(), static_cast<std::size_t>(ac.numel()));
}

double sampled_attention_error(const kernels::AttentionDesc& a, const float* q, const float* k,
                               const float* v, const float* out, const double* lse,
                               const float* dout, const float* dq, const float* dk, const float* dv,
                               int rows) {
  TESSERA_CHECK(
      a.sq == a.sk && a.bias == nullptr && a.q_offset == 0 && a.k_offset == 0 && rows >= 1,
      "result check: self-attention without bias or offsets");
  const Index S = a.sq, D = a.d;
  const double scale = a.effective_scale();
  const auto dot = [D](const float* x, const float* y) {
    double s = 0;
    for (Index d = 0; d < D; ++d) s += static_cast<double>(x[d]) * y[d];
    return s;
  };
  std::vector<Index> picks;
  for (int t = 0; t < rows; ++t)
    picks.push_back(rows == 1 ? 0 : static_cast<Index>(t) * (S - 1) / (rows - 1));
  picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
  Err e_out, e_lse, e_dq, e_dk, e_dv;
  std::vector<double> s(static_cast<std::size_t>(S)), acc(static_cast<std::size_t>(D)),
      acc2(acc.size()), mag(acc.size()), mag2(acc.size());
  for (Index b = 0; b < a.batch; ++b) {
    const Index base = b * S * D;
    const auto row = [&](const float* t, Index i) { return t + base + i * D; };
    // Query rows: the softmax in float64, then out, lse and dq.
    for (Index i : picks) {
      const Index keys = a.causal ? i + 1 : S;
      double m = -INFINITY;
      for (Index j = 0; j < keys; ++j) m = std::max(m, s[j] = scale * dot(row(q, i), row(k, j)));
      double l = 0;
      for (Index j = 0; j < keys; ++j) l += std::exp(s[j] - m);
      const double lse_ref = m + std::log(l);
      e_lse.add(lse[b * S + i], lse_ref);
      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
      for (Index j = 0; j < keys; ++j) {
        s[j] = std::exp(s[j] - lse_ref);  // now the probability
        for (Index d = 0; d < D; ++d) {
          acc[d] += s[j] * row(v, j)[d];
          mag[d] += s[j] * std::fabs(row(v, j)[d]);
        }
      }
      double delta = 0;
      for (Index d = 0; d < D; ++d) {
        e_out.add(row(out, i)[d], acc[d], mag[d]);
        delta += row(dout, i)[d] * acc[d];
      }
      std::fill(acc2.begin(), acc2.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
      for (Index j = 0; j < keys; ++j) {
        const double gv = dot(row(dout, i), row(v, j)), ds = s[j] * (gv - delta),
                     ds_mag = s[j] * (std::fabs(gv) + std::fabs(delta));
        for (Index d = 0; d < D; ++d) {
          acc2[d] += ds * row(k, j)[d];
          mag[d] += ds_mag * std::fabs(row(k, j)[d]);
        }
      }
      for (Index d = 0; d < D; ++d) e_dq.add(row(dq, i)[d], scale * acc2[d], scale * mag[d]);
    }
    // Key rows: every query's probability of this key, from the kernel's lse and out of
    // every row (the query rows above check 16 of them).
    for (Index j : picks) {
      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(acc2.begin(), acc2.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
      std::fill(mag2.begin(), mag2.end(), 0.0);
      for (Index i = a.causal ? j : 0; i < S; ++i) {
        const double p = std::exp(scale * dot(row(q, i), row(k, j)) - lse[b * S + i]);
        const double gv = dot(row(dout, i), row(v, j)), go = dot(row(dout, i), row(out, i));
        const double ds = p * (gv - go), ds_mag = p * (std::fabs(gv) + std::fabs(go));
        for (Index d = 0; d < D; ++d) {
          acc[d] += p * row(dout, i)[d];
          mag[d] += p * std::fabs(row(dout, i)[d]);
          acc2[d] += ds * row(q, i)[d];
          mag2[d] += ds_mag * std::fabs(row(q, i)[d]);
        }
      }
      for (Index d = 0; d < D; ++d) {
        e_dv.add(row(dv, j)[d], acc[d], mag[d]);
        e_dk.add(row(dk, j)[d], scale * acc2[d], scale * mag2[d]);
      }
    }
  }
  return std::max({e_out.rel(), e_lse.rel(), e_dq.rel(), e_dk.rel(), e_dv.rel()});
}

float hashed_value(std::uint64_t i, unsigned seed) {
  std::uint64_t h = (i + seed * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  return static_cast<float>(h % 2001) / 1000.0f - 1.0f;
}

namespace {

// Row-major strides of a shape.
std::vector<Index> strides_of(const std::vector<Index>& shape) {
  std::vector<Index> st(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
  return st;
}

}  // namespace

Tensor hashed_block(const ShardSpec& spec, const std::vector<int>& coords, unsigned seed) {
  const Box box = spec.local_box(coords);
  const std::vector<Index> shape = box.shape(), gst = strides_of(spec.global_shape()),
                           lst = strides_of(shape);
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  const Index n = t.numel();
  const int nd = static_cast<int>(shape.size());
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < n; ++i) {
    Index rest = i, global = 0;
    for (int d = 0; d < nd; ++d) {
      global += (box.lo[d] + rest / lst[d]) * gst[d];
      rest %= lst[d];
    }
    p[i] = hashed_value(static_cast<std::uint64_t>(global), seed);
  }
  return t;
}

double sampled_conv_error(const ShardSpec& spec, const std::vector<int>& coords,
                          const Tensor& weight, const Tensor& bias, unsigned x_seed,
                          unsigned dy_seed, const Tensor& y, const Tensor& dx) {
  const std::vector<Index>& g = spec.global_shape();
  const int nd = static_cast<int>(g.size()) - 2;
  const Index C = g[1];
  const Box box = spec.local_box(coords);
  TESSERA_CHECK(g[0] == 1 && weight.ndim() == nd + 2 && weight.shape()[1] == C &&
                    weight.shape()[0] == C && y.shape() == box.shape() && dx.shape() == box.shape(),
                "result check: a C -> C convolution of one sample keeping its shape");
  const Tensor w = weight.contiguous(), b = bias.contiguous(), yc = y.contiguous(),
               dxc = dx.contiguous();
  std::vector<Index> kern(static_cast<std::size_t>(nd));
  for (int d = 0; d < nd; ++d) kern[d] = w.shape()[2 + d];
  const std::vector<Index> gst = strides_of(g), lst = strides_of(box.shape()),
                           wst = strides_of(w.shape());
  // Picks per spatial dim, crossed: the block's first two and last two planes, the domain's
  // border where this block has it, and six random positions.
  std::mt19937 rng(17);
  std::vector<std::vector<Index>> picks(static_cast<std::size_t>(nd));
  for (int d = 0; d < nd; ++d) {
    const Index lo = box.lo[2 + d], hi = box.hi[2 + d];
    if (hi <= lo) return 0;  // an empty block has nothing to check
    auto& p = picks[d];
    for (Index v : {lo, lo + 1, hi - 2, hi - 1}) p.push_back(std::clamp(v, lo, hi - 1));
    for (int r = 0; r < 6; ++r) p.push_back(lo + static_cast<Index>(rng() % (hi - lo)));
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }
  // The global value of a hashed tensor at (channel, spatial point), zero outside the domain.
  auto value = [&](unsigned seed, Index c, const Index* at) {
    Index flat = c * gst[1];
    for (int d = 0; d < nd; ++d) {
      if (at[d] < 0 || at[d] >= g[2 + d]) return 0.0;
      flat += at[d] * gst[2 + d];
    }
    return static_cast<double>(hashed_value(static_cast<std::uint64_t>(flat), seed));
  };
  auto local_at = [&](const Tensor& t, Index c, const Index* at) {
    Index flat = c * lst[1];
    for (int d = 0; d < nd; ++d) flat += (at[d] - box.lo[2 + d]) * lst[2 + d];
    return static_cast<double>(t.data<float>()[flat]);
  };
  Err ey, edx;
  std::vector<std::size_t> idx(static_cast<std::size_t>(nd), 0);
  Index at[kMaxDims], tap[kMaxDims], nb[kMaxDims];
  for (bool more = true; more;) {
    for (int d = 0; d < nd; ++d) at[d] = picks[d][idx[d]];
    for (Index c = 0; c < C; ++c) {
      // y[c](at) = bias + sum w[c][ci][k] x[ci](at - pad + k); dx[c](at) = sum over the
      // outputs it fed: w[co][c][k] dy[co](at + pad - k).
      double ysum = b.data<float>()[c], dxsum = 0;
      std::fill(tap, tap + nd, 0);
      for (bool taps = true; taps;) {
        Index wk = 0;
        for (int d = 0; d < nd; ++d) wk += tap[d] * wst[2 + d];
        for (Index o = 0; o < C; ++o) {
          for (int d = 0; d < nd; ++d) nb[d] = at[d] - (kern[d] - 1) / 2 + tap[d];
          ysum += w.data<float>()[c * wst[0] + o * wst[1] + wk] * value(x_seed, o, nb);
          for (int d = 0; d < nd; ++d) nb[d] = at[d] + (kern[d] - 1) / 2 - tap[d];
          dxsum += w.data<float>()[o * wst[0] + c * wst[1] + wk] * value(dy_seed, o, nb);
        }
        taps = false;
        for (int d = nd - 1; d >= 0 && !taps; --d) {
          if (++tap[d] < kern[d])
            taps = true;
          else
            tap[d] = 0;
        }
      }
      ey.add(local_at(yc, c, at), ysum);
      edx.add(local_at(dxc, c, at), dxsum);
    }
    more = false;
    for (int d = nd - 1; d >= 0 && !more; --d) {
      if (++idx[d] < picks[d].size())
        more = true;
      else
        idx[d] = 0;
    }
  }
  return std::max(ey.rel(), edx.rel());
}

}  // namespace tessera::bench
