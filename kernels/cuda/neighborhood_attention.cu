// CUDA neighbourhood attention (kernels/neighborhood_attention.hpp): one thread per query
// for the forward (an online softmax over its window) and for dq; one thread per frame cell
// for dk and dv, which gathers the block's queries whose windows hold the cell (at most
// 2k + 1 candidates per dim, in query order) - no atomics, a fixed order, as on the host.
// Sums in double; a thread keeps D-long accumulators in registers, so head dims up to 128.
#include <cmath>
#include <string>

#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/cuda/register_bucket.cuh"
#include "kernels/neighborhood_attention.hpp"

namespace tessera::kernels {
namespace {

constexpr unsigned kThreads = 128;

// The descriptor with its derived counts, passed by value to the kernels.
struct Geo {
  NeighborhoodDesc d;
  Index C, qcells, fcells, keys;
  double scale;
};

Geo geo_of(const NeighborhoodDesc& d) {
  Geo g{d, d.heads * d.dim, 1, 1, 1, d.scale > 0 ? d.scale : 1.0 / std::sqrt(double(d.dim))};
  for (int i = 0; i < d.nd; ++i) {
    g.qcells *= d.q_shape[i];
    g.fcells *= d.f_shape[i];
    g.keys *= d.kernel[i];
  }
  return g;
}

// Per dim: the first key of query cell qc's window.
__device__ void window_starts(const Geo& g, Index qc, Index* start) {
  for (int i = g.d.nd - 1; i >= 0; --i) {
    const Index pos = g.d.q_lo[i] + qc % g.d.q_shape[i];
    qc /= g.d.q_shape[i];
    start[i] = neighborhood_start(pos, g.d.extent[i], g.d.kernel[i], g.d.dilation[i]);
  }
}

// Frame cell of window key t (the last dim fastest).
__device__ Index key_cell(const Geo& g, const Index* start, Index t) {
  Index off[3] = {0, 0, 0};
  for (int i = g.d.nd - 1; i >= 0; --i) off[i] = t % g.d.kernel[i], t /= g.d.kernel[i];
  Index f = 0;
  for (int i = 0; i < g.d.nd; ++i)
    f = f * g.d.f_shape[i] + (start[i] + off[i] * g.d.dilation[i] - g.d.f_lo[i]);
  return f;
}

// D-long dot product of two channel-first rows (stride = cells between channels).
template <class T>
__device__ double dot(const T* a, Index sa, const T* b, Index sb, Index D) {
  double s = 0;
  for (Index c = 0; c < D; ++c)
    s += static_cast<double>(a[c * sa]) * static_cast<double>(b[c * sb]);
  return s;
}

// A thread's place among batch x heads x cells (queries or frame cells); false past the
// end. Its rows: queries and outputs at q_row + c qcells, keys at k_row + c fcells, values
// C fcells further.
struct Slot {
  Index t, nh, cell, q_row, k_row;
};
__device__ bool slot_of(const Geo& g, Index cells, Slot& s) {
  s.t = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
  if (s.t >= g.d.batch * g.d.heads * cells) return false;
  s.nh = s.t / cells;
  s.cell = s.t % cells;
  const Index n = s.nh / g.d.heads, h = s.nh % g.d.heads;
  s.q_row = (n * g.C + h * g.d.dim) * g.qcells;
  s.k_row = (n * 2 * g.C + h * g.d.dim) * g.fcells;
  return true;
}

template <class T, int MaxD>
__global__ void forward_kernel(Geo g, const T* q, const T* kv, T* out, double* lse) {
  Slot sl;
  if (!slot_of(g, g.qcells, sl)) return;
  const Index D = g.d.dim, qc = sl.cell;
  Index start[3];
  window_starts(g, qc, start);
  const T* qr = q + sl.q_row + qc;
  const T* kb = kv + sl.k_row;
  const T* vb = kb + g.C * g.fcells;
  double acc[MaxD];
  for (Index c = 0; c < D; ++c) acc[c] = 0;
  double m = -INFINITY, l = 0;
  for (Index t = 0; t < g.keys; ++t) {
    const Index f = key_cell(g, start, t);
    const double s = g.scale * dot(qr, g.qcells, kb + f, g.fcells, D);
    if (s > m) {
      const double corr = exp(m - s);
      l *= corr;
      for (Index c = 0; c < D; ++c) acc[c] *= corr;
      m = s;
    }
    const double p = exp(s - m);
    l += p;
    for (Index c = 0; c < D; ++c) acc[c] += p * static_cast<double>(vb[c * g.fcells + f]);
  }
  T* o = out + sl.q_row + qc;
  for (Index c = 0; c < D; ++c) o[c * g.qcells] = static_cast<T>(acc[c] / l);
  lse[sl.t] = m + log(l);
}

// D_i = dO_i . O_i per query.
template <class T>
__global__ void row_dots_kernel(Geo g, const T* out, const T* dout, double* di) {
  Slot sl;
  if (!slot_of(g, g.qcells, sl)) return;
  const Index off = sl.q_row + sl.cell;
  di[sl.t] = dot(out + off, g.qcells, dout + off, g.qcells, g.d.dim);
}

template <class T, int MaxD>
__global__ void dq_kernel(Geo g, const T* q, const T* kv, const T* dout, const double* lse,
                          const double* di, T* dq) {
  Slot sl;
  if (!slot_of(g, g.qcells, sl)) return;
  const Index D = g.d.dim;
  Index start[3];
  window_starts(g, sl.cell, start);
  const Index off = sl.q_row + sl.cell;
  const T* kb = kv + sl.k_row;
  const T* vb = kb + g.C * g.fcells;
  double acc[MaxD];
  for (Index c = 0; c < D; ++c) acc[c] = 0;
  const double li = lse[sl.t], dd = di[sl.t];
  for (Index t = 0; t < g.keys; ++t) {
    const Index f = key_cell(g, start, t);
    const double p = exp(g.scale * dot(q + off, g.qcells, kb + f, g.fcells, D) - li);
    const double ds = p * (dot(dout + off, g.qcells, vb + f, g.fcells, D) - dd);
    for (Index c = 0; c < D; ++c) acc[c] += ds * static_cast<double>(kb[c * g.fcells + f]);
  }
  for (Index c = 0; c < D; ++c) dq[off + c * g.qcells] = static_cast<T>(g.scale * acc[c]);
}

// One thread per (sample, head, frame cell): every query of the block whose window holds the
// cell, in query order; dk and dv added to the frame.
template <class T, int MaxD>
__global__ void dkv_kernel(Geo g, const T* q, const T* kv, const T* dout, const double* lse,
                           const double* di, T* dkv) {
  Slot sl;
  if (!slot_of(g, g.fcells, sl)) return;
  const Index D = g.d.dim, nh = sl.nh, f = sl.cell;
  const int nd = g.d.nd;
  // The cell's global position; per dim the candidate queries: its class, within k dil.
  Index pos[3] = {0, 0, 0}, lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0}, step[3] = {1, 1, 1};
  Index rest = f;
  for (int i = nd - 1; i >= 0; --i) {
    pos[i] = g.d.f_lo[i] + rest % g.d.f_shape[i];
    rest /= g.d.f_shape[i];
  }
  for (int i = 0; i < nd; ++i) {
    const Index k = g.d.kernel[i], dil = g.d.dilation[i];
    const Index qlo = g.d.q_lo[i], qhi = g.d.q_lo[i] + g.d.q_shape[i];
    Index a = pos[i] - k * dil;
    if (a < qlo) a = qlo;
    a += ((pos[i] - a) % dil + dil) % dil;  // same class as the cell
    Index b = pos[i] + k * dil + 1;
    if (b > qhi) b = qhi;
    if (a >= b) return;  // no query of the block reaches this cell
    lo[i] = a, hi[i] = b, step[i] = dil;
  }
  const Index koff = sl.k_row + f, voff = koff + g.C * g.fcells;
  double ak[MaxD], av[MaxD];
  for (Index c = 0; c < D; ++c) ak[c] = av[c] = 0;
  Index i3[3] = {lo[0], lo[1], lo[2]};
  for (;;) {
    bool inside = true;
    Index qc = 0;
    for (int i = 0; i < nd; ++i) {
      const Index s = neighborhood_start(i3[i], g.d.extent[i], g.d.kernel[i], g.d.dilation[i]);
      const Index last = s + (g.d.kernel[i] - 1) * g.d.dilation[i];
      inside = inside && pos[i] >= s && pos[i] <= last;  // same class: on the window's grid
      qc = qc * g.d.q_shape[i] + (i3[i] - g.d.q_lo[i]);
    }
    if (inside) {
      const Index r = nh * g.qcells + qc;
      const Index qo = sl.q_row + qc;
      const double p = exp(g.scale * dot(q + qo, g.qcells, kv + koff, g.fcells, D) - lse[r]);
      const double ds = p * (dot(dout + qo, g.qcells, kv + voff, g.fcells, D) - di[r]);
      for (Index c = 0; c < D; ++c) {
        ak[c] += g.scale * ds * static_cast<double>(q[qo + c * g.qcells]);
        av[c] += p * static_cast<double>(dout[qo + c * g.qcells]);
      }
    }
    int i = nd - 1;  // odometer, the last dim fastest: query order
    for (; i >= 0; --i) {
      i3[i] += step[i];
      if (i3[i] < hi[i]) break;
      i3[i] = lo[i];
    }
    if (i < 0) break;
  }
  for (Index c = 0; c < D; ++c) {
    dkv[koff + c * g.fcells] =
        static_cast<T>(static_cast<double>(dkv[koff + c * g.fcells]) + ak[c]);
    dkv[voff + c * g.fcells] =
        static_cast<T>(static_cast<double>(dkv[voff + c * g.fcells]) + av[c]);
  }
}

template <class T>
void forward(const Device& dev, const NeighborhoodDesc& d, const void* q, const void* kv, void* out,
             double* lse) {
  const Geo g = geo_of(d);
  const Index n = d.batch * d.heads * g.qcells;
  if (n == 0) return;
  with_register_bucket(
      d.dim, "neighborhood_attention_forward", "channels per head", [&]<int MaxD>() {
        launch_with_room("neighbourhood attention forward", [&] {
          forward_kernel<T, MaxD><<<cuda_blocks_exact(n, kThreads), kThreads, 0, stream_of(dev)>>>(
              g, static_cast<const T*>(q), static_cast<const T*>(kv), static_cast<T*>(out), lse);
        });
      });
}

template <class T>
void backward(const Device& dev, const NeighborhoodDesc& d, const void* qv, const void* kvv,
              const void* outv, const void* doutv, const double* lse, void* dqv, void* dkvv) {
  const Geo g = geo_of(d);
  const Index nq = d.batch * d.heads * g.qcells, nf = d.batch * d.heads * g.fcells;
  if (nq == 0) return;
  const cudaStream_t st = stream_of(dev);
  const auto *q = static_cast<const T*>(qv), *kv = static_cast<const T*>(kvv),
             *dout = static_cast<const T*>(doutv);
  DeviceScratch<double> di(static_cast<std::size_t>(nq));
  row_dots_kernel<T><<<cuda_blocks_exact(nq, kThreads), kThreads, 0, st>>>(
      g, static_cast<const T*>(outv), dout, di.get());
  check_launch("neighbourhood attention rowsum(dO O)");
  with_register_bucket(
      d.dim, "neighborhood_attention_backward", "channels per head", [&]<int MaxD>() {
        launch_with_room("neighbourhood attention dQ", [&] {
          dq_kernel<T, MaxD><<<cuda_blocks_exact(nq, kThreads), kThreads, 0, st>>>(
              g, q, kv, dout, lse, di.get(), static_cast<T*>(dqv));
        });
        if (nf > 0)
          launch_with_room("neighbourhood attention dK dV", [&] {
            dkv_kernel<T, MaxD><<<cuda_blocks_exact(nf, kThreads), kThreads, 0, st>>>(
                g, q, kv, dout, lse, di.get(), static_cast<T*>(dkvv));
          });
      });
}

}  // namespace

void cuda::neighborhood_attention_forward(const Device& dev, const NeighborhoodDesc& d,
                                          const void* q, const void* kv, void* out, double* lse) {
  if (d.type == DType::f64) return forward<double>(dev, d, q, kv, out, lse);
  forward<float>(dev, d, q, kv, out, lse);
}

void cuda::neighborhood_attention_backward(const Device& dev, const NeighborhoodDesc& d,
                                           const void* q, const void* kv, const void* out,
                                           const void* dout, const double* lse, void* dq,
                                           void* dkv) {
  if (d.type == DType::f64) return backward<double>(dev, d, q, kv, out, dout, lse, dq, dkv);
  backward<float>(dev, d, q, kv, out, dout, lse, dq, dkv);
}

}  // namespace tessera::kernels
