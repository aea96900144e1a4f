// Host neighbourhood attention: OpenMP over (sample, head); per query the window's keys are
// enumerated from the per-dim starts, scores and the softmax kept in float64.
#include <cmath>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/neighborhood_attention.hpp"

namespace tessera::kernels::cpu {
namespace {

struct Geometry {
  const NeighborhoodDesc& d;
  Index C, qcells = 1, fcells = 1, keys = 1;
  explicit Geometry(const NeighborhoodDesc& desc) : d(desc), C(desc.heads * desc.dim) {
    for (int i = 0; i < d.nd; ++i) {
      qcells *= d.q_shape[i];
      fcells *= d.f_shape[i];
      keys *= d.kernel[i];
    }
  }
  // Frame cells of query cell `qc`'s keys, in window order (the last dim fastest).
  void window(Index qc, std::vector<Index>& cells) const {
    Index idx[3] = {0, 0, 0}, start[3] = {0, 0, 0}, rest = qc;
    for (int i = d.nd - 1; i >= 0; --i) idx[i] = rest % d.q_shape[i], rest /= d.q_shape[i];
    for (int i = 0; i < d.nd; ++i)
      start[i] = neighborhood_start(d.q_lo[i] + idx[i], d.extent[i], d.kernel[i], d.dilation[i]);
    for (Index t = 0; t < keys; ++t) {
      Index r = t, f = 0, stride = 1;
      Index off[3] = {0, 0, 0};
      for (int i = d.nd - 1; i >= 0; --i) off[i] = r % d.kernel[i], r /= d.kernel[i];
      for (int i = d.nd - 1; i >= 0; --i) {
        f += (start[i] + off[i] * d.dilation[i] - d.f_lo[i]) * stride;
        stride *= d.f_shape[i];
      }
      cells[static_cast<std::size_t>(t)] = f;
    }
  }
};

double scale_of(const NeighborhoodDesc& d) {
  return d.scale > 0 ? d.scale : 1.0 / std::sqrt(static_cast<double>(d.dim));
}

template <class T>
void forward(const NeighborhoodDesc& d, const T* q, const T* kv, T* out, double* lse) {
  const Geometry g(d);
  const double sc = scale_of(d);
#pragma omp parallel
  {
    std::vector<Index> cells(static_cast<std::size_t>(g.keys));
    std::vector<double> s(static_cast<std::size_t>(g.keys));
#pragma omp for schedule(static)
    for (Index nh = 0; nh < d.batch * d.heads; ++nh) {
      const Index n = nh / d.heads, h = nh % d.heads;
      const T* qn = q + (n * g.C + h * d.dim) * g.qcells;
      const T* kn = kv + (n * 2 * g.C + h * d.dim) * g.fcells;
      const T* vn = kv + (n * 2 * g.C + g.C + h * d.dim) * g.fcells;
      T* on = out + (n * g.C + h * d.dim) * g.qcells;
      for (Index qc = 0; qc < g.qcells; ++qc) {
        g.window(qc, cells);
        double mx = -INFINITY;
        for (Index t = 0; t < g.keys; ++t) {
          double acc = 0;
          const Index f = cells[static_cast<std::size_t>(t)];
          for (Index c = 0; c < d.dim; ++c)
            acc += static_cast<double>(qn[c * g.qcells + qc]) *
                   static_cast<double>(kn[c * g.fcells + f]);
          s[static_cast<std::size_t>(t)] = acc * sc;
          mx = std::max(mx, acc * sc);
        }
        double sum = 0;
        for (Index t = 0; t < g.keys; ++t)
          sum += (s[static_cast<std::size_t>(t)] = std::exp(s[static_cast<std::size_t>(t)] - mx));
        for (Index c = 0; c < d.dim; ++c) {
          double acc = 0;
          for (Index t = 0; t < g.keys; ++t)
            acc += s[static_cast<std::size_t>(t)] *
                   static_cast<double>(vn[c * g.fcells + cells[static_cast<std::size_t>(t)]]);
          on[c * g.qcells + qc] = static_cast<T>(acc / sum);
        }
        lse[nh * g.qcells + qc] = mx + std::log(sum);
      }
    }
  }
}

template <class T>
void backward(const NeighborhoodDesc& d, const T* q, const T* kv, const T* out, const T* dout,
              const double* lse, T* dq, T* dkv) {
  const Geometry g(d);
  const double sc = scale_of(d);
#pragma omp parallel
  {
    std::vector<Index> cells(static_cast<std::size_t>(g.keys));
    std::vector<double> p(static_cast<std::size_t>(g.keys)), ds(static_cast<std::size_t>(g.keys));
#pragma omp for schedule(static)
    for (Index nh = 0; nh < d.batch * d.heads; ++nh) {
      const Index n = nh / d.heads, h = nh % d.heads;
      const Index qoff = (n * g.C + h * d.dim) * g.qcells;
      const Index koff = (n * 2 * g.C + h * d.dim) * g.fcells;
      const Index voff = (n * 2 * g.C + g.C + h * d.dim) * g.fcells;
      for (Index qc = 0; qc < g.qcells; ++qc) {
        g.window(qc, cells);
        double dd = 0;  // D_i = dO . O
        for (Index c = 0; c < d.dim; ++c)
          dd += static_cast<double>(dout[qoff + c * g.qcells + qc]) *
                static_cast<double>(out[qoff + c * g.qcells + qc]);
        for (Index t = 0; t < g.keys; ++t) {
          const Index f = cells[static_cast<std::size_t>(t)];
          double s = 0, dp = 0;
          for (Index c = 0; c < d.dim; ++c) {
            s += static_cast<double>(q[qoff + c * g.qcells + qc]) *
                 static_cast<double>(kv[koff + c * g.fcells + f]);
            dp += static_cast<double>(dout[qoff + c * g.qcells + qc]) *
                  static_cast<double>(kv[voff + c * g.fcells + f]);
          }
          p[static_cast<std::size_t>(t)] = std::exp(s * sc - lse[nh * g.qcells + qc]);
          ds[static_cast<std::size_t>(t)] = p[static_cast<std::size_t>(t)] * (dp - dd);
        }
        for (Index c = 0; c < d.dim; ++c) {
          double acc = 0;
          const double qv = static_cast<double>(q[qoff + c * g.qcells + qc]);
          const double go = static_cast<double>(dout[qoff + c * g.qcells + qc]);
          for (Index t = 0; t < g.keys; ++t) {
            const Index f = cells[static_cast<std::size_t>(t)];
            acc +=
                ds[static_cast<std::size_t>(t)] * static_cast<double>(kv[koff + c * g.fcells + f]);
            dkv[koff + c * g.fcells + f] +=
                static_cast<T>(sc * ds[static_cast<std::size_t>(t)] * qv);
            dkv[voff + c * g.fcells + f] += static_cast<T>(p[static_cast<std::size_t>(t)] * go);
          }
          dq[qoff + c * g.qcells + qc] = static_cast<T>(sc * acc);
        }
      }
    }
  }
}

}  // namespace

void neighborhood_attention_forward(const NeighborhoodDesc& d, const void* q, const void* kv,
                                    void* out, double* lse) {
  dispatch(d.type, [&](auto z) {
    using T = decltype(z);
    forward(d, static_cast<const T*>(q), static_cast<const T*>(kv), static_cast<T*>(out), lse);
  });
}

void neighborhood_attention_backward(const NeighborhoodDesc& d, const void* q, const void* kv,
                                     const void* out, const void* dout, const double* lse, void* dq,
                                     void* dkv) {
  dispatch(d.type, [&](auto z) {
    using T = decltype(z);
    backward(d, static_cast<const T*>(q), static_cast<const T*>(kv), static_cast<const T*>(out),
             static_cast<const T*>(dout), lse, static_cast<T*>(dq), static_cast<T*>(dkv));
  });
}

}  // namespace tessera::kernels::cpu
