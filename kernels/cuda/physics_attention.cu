// CUDA physics attention point passes (kernels/physics_attention.hpp). The point features
// (x, w, y, dy, dx) are device arrays; the slice parameters and the per-token float64
// arrays (acc, O, dO, dA, dZ and the parameter gradients) stay on the host, where the token
// part runs, and travel here once per call (a few KiB). A thread per point computes the
// slice weights and the per-point adjoint (slice logits in registers: up to 128 slices);
// sums over the points are partial per tile of 256 points (a thread per tile and output
// value) and then added tile by tile in order, as on the host: deterministic, float64.
#include <string>
#include <vector>

#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/cuda/register_bucket.cuh"
#include "kernels/physics_attention.hpp"

namespace tessera::kernels {
namespace {

constexpr Index kTile = 256;
constexpr unsigned kThreads = 128;

struct Geo {
  Index N, H, D, M, P, tiles;
  __host__ __device__ Index jobs() const { return N * H * tiles; }
  __device__ Index a_offset(Index n, Index h) const { return (n * 2 * H + h) * D * P; }
  __device__ Index f_offset(Index n, Index h) const { return ((n * 2 + 1) * H + h) * D * P; }
  __device__ Index w_offset(Index n, Index h) const { return (n * H + h) * M * P; }
  __device__ Index y_offset(Index n, Index h) const { return (n * H + h) * D * P; }
};

Geo geo_of(const PhysicsShape& s) {
  return {s.batch, s.heads, s.dim, s.slices, s.points, (s.points + kTile - 1) / kTile};
}

__device__ Index thread_index() {
  return blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
}

// w[m, p] = softmax_m((ws[m] . a_p + bs[m]) / tau[h]), a thread per (n, h, p).
template <class T, int MaxM>
__global__ void weights_kernel(Geo g, const T* x, const double* ws, const double* bs,
                               const double* tau, T* w) {
  const Index i = thread_index();
  if (i >= g.N * g.H * g.P) return;
  const Index nh = i / g.P, p = i % g.P, n = nh / g.H, h = nh % g.H;
  const T* a = x + g.a_offset(n, h) + p;
  double l[MaxM];
  double mx = -INFINITY;
  for (Index m = 0; m < g.M; ++m) {
    double s = bs[m];
    for (Index d = 0; d < g.D; ++d) s += ws[m * g.D + d] * static_cast<double>(a[d * g.P]);
    l[m] = s / tau[h];
    mx = fmax(mx, l[m]);
  }
  double sum = 0;
  for (Index m = 0; m < g.M; ++m) sum += l[m] = exp(l[m] - mx);
  T* wp = w + g.w_offset(n, h) + p;
  for (Index m = 0; m < g.M; ++m) wp[m * g.P] = static_cast<T>(l[m] / sum);
}

// part[job, m, c] = sum over the tile's points of w[m, p] v[c, p] (c < C), and with
// `count` also part[job, m, C] = sum w[m, p]; v's rows of (n, h) start at n sn + h D P + b0.
template <class T>
__global__ void tile_sums_kernel(Geo g, const T* w, const T* v, Index sn, Index b0, Index C,
                                 bool count, double* part) {
  const Index cols = C + (count ? 1 : 0), slot = g.M * cols;
  const Index i = thread_index();
  if (i >= g.jobs() * slot) return;
  const Index job = i / slot, j = i % slot, m = j / cols, c = j % cols;
  const Index nh = job / g.tiles, tile = job % g.tiles, n = nh / g.H, h = nh % g.H;
  const Index p0 = tile * kTile, len = p0 + kTile < g.P ? kTile : g.P - p0;
  const T* wm = w + g.w_offset(n, h) + m * g.P + p0;
  double s = 0;
  if (c < C) {
    const T* vc = v + n * sn + h * g.D * g.P + b0 + c * g.P + p0;
    for (Index k = 0; k < len; ++k) s += static_cast<double>(wm[k]) * static_cast<double>(vc[k]);
  } else {
    for (Index k = 0; k < len; ++k) s += static_cast<double>(wm[k]);
  }
  part[i] = s;
}

// out[(n, h), j] = the tiles' partials of (n, h) added in tile order.
__global__ void sum_tiles_kernel(Geo g, Index slot, const double* part, double* out) {
  const Index i = thread_index();
  if (i >= g.N * g.H * slot) return;
  const Index nh = i / slot, j = i % slot;
  double s = 0;
  for (Index t = 0; t < g.tiles; ++t) s += part[(nh * g.tiles + t) * slot + j];
  out[i] = s;
}

// y[d, p] = sum_m O[m, d] w[m, p], a thread per (n, h, d, p).
template <class T>
__global__ void deslice_kernel(Geo g, const T* w, const double* o, T* y) {
  const Index i = thread_index();
  if (i >= g.N * g.H * g.D * g.P) return;
  const Index nh = i / (g.D * g.P), d = i / g.P % g.D, p = i % g.P;
  const Index n = nh / g.H, h = nh % g.H;
  const T* wp = w + g.w_offset(n, h) + p;
  const double* on = o + nh * g.M * g.D + d;
  double s = 0;
  for (Index m = 0; m < g.M; ++m) s += on[m * g.D] * static_cast<double>(wp[m * g.P]);
  y[g.y_offset(n, h) + d * g.P + p] = static_cast<T>(s);
}

// The per-point adjoint of slice + deslice (see the host's slice_backward): dx, and per point
// dL[m] (the logits' gradient, to dl) and its temperature term (to dtau_p).
template <class T, int MaxM>
__global__ void point_backward_kernel(Geo g, const T* x, const T* w, const T* dy, const double* ws,
                                      const double* bs, const double* tau, const double* o,
                                      const double* da, const double* dz, T* dx, double* dl,
                                      double* dtau_p) {
  const Index i = thread_index();
  if (i >= g.N * g.H * g.P) return;
  const Index nh = i / g.P, p = i % g.P, n = nh / g.H, h = nh % g.H;
  const T* a = x + g.a_offset(n, h) + p;
  const T* f = x + g.f_offset(n, h) + p;
  const T* gy = dy + g.y_offset(n, h) + p;
  const T* wp = w + g.w_offset(n, h) + p;
  const double* on = o + nh * g.M * g.D;
  const double* dan = da + nh * g.M * g.D;
  const double t = tau[h];
  double l[MaxM], dw[MaxM];
  double row = 0;
  for (Index m = 0; m < g.M; ++m) {
    double s = bs[m], q = dz[nh * g.M + m];
    for (Index d = 0; d < g.D; ++d) {
      s += ws[m * g.D + d] * static_cast<double>(a[d * g.P]);
      q += on[m * g.D + d] * static_cast<double>(gy[d * g.P]) +
           dan[m * g.D + d] * static_cast<double>(f[d * g.P]);
    }
    l[m] = s;
    dw[m] = q;
    row += static_cast<double>(wp[m * g.P]) * q;
  }
  double dt = 0;
  for (Index m = 0; m < g.M; ++m) {
    const double dlogit = static_cast<double>(wp[m * g.P]) * (dw[m] - row);
    dt -= dlogit * l[m] / (t * t);
    dw[m] = dlogit / t;  // dL
    dl[(nh * g.M + m) * g.P + p] = dw[m];
  }
  dtau_p[i] = dt;
  for (Index d = 0; d < g.D; ++d) {
    double sa = 0, sf = 0;
    for (Index m = 0; m < g.M; ++m) {
      sa += dw[m] * ws[m * g.D + d];
      sf += static_cast<double>(wp[m * g.P]) * dan[m * g.D + d];
    }
    dx[g.a_offset(n, h) + d * g.P + p] = static_cast<T>(sa);
    dx[g.f_offset(n, h) + d * g.P + p] = static_cast<T>(sf);
  }
}

// Per tile: dws (M D) = sum dL[m] a[d], dbs (M) = sum dL[m], dtau (1) = sum dtau_p.
template <class T>
__global__ void param_tiles_kernel(Geo g, const T* x, const double* dl, const double* dtau_p,
                                   double* part) {
  const Index slot = g.M * g.D + g.M + 1;
  const Index i = thread_index();
  if (i >= g.jobs() * slot) return;
  const Index job = i / slot, j = i % slot;
  const Index nh = job / g.tiles, tile = job % g.tiles, n = nh / g.H, h = nh % g.H;
  const Index p0 = tile * kTile, len = p0 + kTile < g.P ? kTile : g.P - p0;
  double s = 0;
  if (j < g.M * g.D) {
    const double* dm = dl + (nh * g.M + j / g.D) * g.P + p0;
    const T* ad = x + g.a_offset(n, h) + (j % g.D) * g.P + p0;
    for (Index k = 0; k < len; ++k) s += dm[k] * static_cast<double>(ad[k]);
  } else if (j < g.M * g.D + g.M) {
    const double* dm = dl + (nh * g.M + j - g.M * g.D) * g.P + p0;
    for (Index k = 0; k < len; ++k) s += dm[k];
  } else {
    for (Index k = 0; k < len; ++k) s += dtau_p[nh * g.P + p0 + k];
  }
  part[i] = s;
}

// The parameter sums in job order: dws and dbs over every job, dtau[h] over h's jobs.
__global__ void param_sums_kernel(Geo g, const double* part, double* out) {
  const Index slot = g.M * g.D + g.M + 1;
  const Index i = thread_index();
  if (i >= g.M * g.D + g.M + g.H) return;
  double s = 0;
  if (i < g.M * g.D + g.M) {
    for (Index job = 0; job < g.jobs(); ++job) s += part[job * slot + i];
  } else {
    const Index h = i - (g.M * g.D + g.M);
    for (Index job = 0; job < g.jobs(); ++job)
      if (job / g.tiles % g.H == h) s += part[job * slot + slot - 1];
  }
  out[i] = s;
}

// A host float64 array copied up to the device on the stream; and back (waited for).
struct Uploaded {
  DeviceScratch<double> d;
  Uploaded(const Device& dev, const double* h, Index n)
      : d(static_cast<std::size_t>(n > 0 ? n : 1)) {
    if (n > 0)
      TESSERA_CUDA_CHECK(cudaMemcpyAsync(d.get(), h, static_cast<std::size_t>(n) * sizeof(double),
                                         cudaMemcpyHostToDevice, stream_of(dev)));
  }
  const double* get() const { return d.get(); }
};
void down(const Device& dev, double* h, const double* d, Index n) {
  if (n > 0)
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(h, d, static_cast<std::size_t>(n) * sizeof(double),
                                       cudaMemcpyDeviceToHost, stream_of(dev)));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_of(dev)));
}

// Tile sums of w against rows v (C of them per (n, h)), then in tile order, to the host.
template <class T>
void point_sums(const Device& dev, const Geo& g, const T* w, const T* v, Index sn, Index b0,
                Index C, bool count, double* host_out) {
  const Index slot = g.M * (C + (count ? 1 : 0)), total = g.N * g.H * slot;
  if (total == 0) return;
  DeviceScratch<double> part(static_cast<std::size_t>(std::max<Index>(g.jobs() * slot, 1))),
      out(static_cast<std::size_t>(total));
  const cudaStream_t st = stream_of(dev);
  if (g.jobs() > 0)
    tile_sums_kernel<T><<<cuda_blocks_exact(g.jobs() * slot, kThreads), kThreads, 0, st>>>(
        g, w, v, sn, b0, C, count, part.get());
  sum_tiles_kernel<<<cuda_blocks_exact(total, kThreads), kThreads, 0, st>>>(g, slot, part.get(),
                                                                            out.get());
  check_launch("physics attention point sums", 2);
  down(dev, host_out, out.get(), total);
}

template <class T>
void slice(const Device& dev, const PhysicsShape& s, const void* xv, const SliceParams& sp,
           void* wv, double* acc) {
  const Geo g = geo_of(s);
  const auto* x = static_cast<const T*>(xv);
  auto* w = static_cast<T*>(wv);
  const Uploaded ws(dev, sp.ws, g.M * g.D), bs(dev, sp.bs, g.M), tau(dev, sp.tau, g.H);
  if (g.N * g.H * g.P > 0) {
    with_register_bucket(g.M, "physics_slice", "slices", [&]<int MaxM>() {
      launch_with_room("physics attention slice weights", [&] {
        weights_kernel<T, MaxM>
            <<<cuda_blocks_exact(g.N * g.H * g.P, kThreads), kThreads, 0, stream_of(dev)>>>(
                g, x, ws.get(), bs.get(), tau.get(), w);
      });
    });
  }
  // Values f: rows of (n, h) at ((2 n + 1) H + h) D P.
  point_sums(dev, g, w, x, 2 * g.H * g.D * g.P, g.H * g.D * g.P, g.D, true, acc);
}

template <class T>
void deslice(const Device& dev, const PhysicsShape& s, const void* w, const double* o, void* y) {
  const Geo g = geo_of(s);
  const Index n = g.N * g.H * g.D * g.P;
  if (n == 0) return;
  const Uploaded od(dev, o, g.N * g.H * g.M * g.D);
  deslice_kernel<T><<<cuda_blocks_exact(n, kThreads), kThreads, 0, stream_of(dev)>>>(
      g, static_cast<const T*>(w), od.get(), static_cast<T*>(y));
  check_launch("physics attention deslice");
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_of(dev)));  // od is freed on return
}

template <class T>
void slice_backward(const Device& dev, const PhysicsShape& s, const SliceParams& sp,
                    const SliceBackward& b) {
  const Geo g = geo_of(s);
  const Index pts = g.N * g.H * g.P, tok = g.N * g.H * g.M * g.D;
  const Uploaded ws(dev, sp.ws, g.M * g.D), bs(dev, sp.bs, g.M), tau(dev, sp.tau, g.H);
  const Uploaded o(dev, b.o, tok), da(dev, b.da, tok), dz(dev, b.dz, g.N * g.H * g.M);
  DeviceScratch<double> dl(static_cast<std::size_t>(std::max<Index>(pts * g.M, 1))),
      dtau_p(static_cast<std::size_t>(std::max<Index>(pts, 1)));
  const cudaStream_t st = stream_of(dev);
  const auto* x = static_cast<const T*>(b.x);
  if (pts > 0) {
    with_register_bucket(g.M, "physics_slice_backward", "slices", [&]<int MaxM>() {
      launch_with_room("physics attention point adjoint", [&] {
        point_backward_kernel<T, MaxM><<<cuda_blocks_exact(pts, kThreads), kThreads, 0, st>>>(
            g, x, static_cast<const T*>(b.w), static_cast<const T*>(b.dy), ws.get(), bs.get(),
            tau.get(), o.get(), da.get(), dz.get(), static_cast<T*>(b.dx), dl.get(), dtau_p.get());
      });
    });
  }
  const Index slot = g.M * g.D + g.M + 1, nout = g.M * g.D + g.M + g.H;
  DeviceScratch<double> part(static_cast<std::size_t>(std::max<Index>(g.jobs() * slot, 1))),
      out(static_cast<std::size_t>(nout));
  if (g.jobs() > 0)
    param_tiles_kernel<T><<<cuda_blocks_exact(g.jobs() * slot, kThreads), kThreads, 0, st>>>(
        g, x, dl.get(), dtau_p.get(), part.get());
  param_sums_kernel<<<cuda_blocks_exact(nout, kThreads), kThreads, 0, st>>>(g, part.get(),
                                                                            out.get());
  check_launch("physics attention parameter sums", 2);
  std::vector<double> h(static_cast<std::size_t>(nout));
  down(dev, h.data(), out.get(), nout);
  for (Index i = 0; i < g.M * g.D; ++i) b.dws[i] += h[static_cast<std::size_t>(i)];
  for (Index m = 0; m < g.M; ++m) b.dbs[m] += h[static_cast<std::size_t>(g.M * g.D + m)];
  for (Index k = 0; k < g.H; ++k) b.dtau[k] += h[static_cast<std::size_t>(g.M * g.D + g.M + k)];
}

template <class F>
void by_type(DType t, F&& f) {
  if (t == DType::f64) return f(double{});
  TESSERA_CHECK(t == DType::f32, "physics attention takes float32 or float64, not " << name_of(t));
  f(float{});
}

}  // namespace

void cuda::physics_slice(const Device& dev, DType t, const PhysicsShape& s, const void* x,
                         const SliceParams& p, void* w, double* acc) {
  by_type(t, [&](auto z) { slice<decltype(z)>(dev, s, x, p, w, acc); });
}

void cuda::physics_deslice(const Device& dev, DType t, const PhysicsShape& s, const void* w,
                           const double* o, void* y) {
  by_type(t, [&](auto z) { deslice<decltype(z)>(dev, s, w, o, y); });
}

void cuda::physics_deslice_grad(const Device& dev, DType t, const PhysicsShape& s, const void* w,
                                const void* dy, double* d_o) {
  by_type(t, [&](auto z) {
    using T = decltype(z);
    const Geo g = geo_of(s);
    // dy: rows of (n, h) at (n H + h) D P.
    point_sums(dev, g, static_cast<const T*>(w), static_cast<const T*>(dy), g.H * g.D * g.P, 0, g.D,
               false, d_o);
  });
}

void cuda::physics_slice_backward(const Device& dev, DType t, const PhysicsShape& s,
                                  const SliceParams& p, const SliceBackward& b) {
  by_type(t, [&](auto z) { slice_backward<decltype(z)>(dev, s, p, b); });
}

}  // namespace tessera::kernels
