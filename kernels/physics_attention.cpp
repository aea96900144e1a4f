// Entry points of kernels/physics_attention.hpp: the point passes dispatched on the device
// (host or CUDA), and the token part (host).
#include "kernels/physics_attention.hpp"

#include <cmath>
#include <vector>

#include "decomp/error.hpp"
#include "kernels/attention.hpp"

namespace tessera::kernels {
namespace {

bool check(const PhysicsShape& s, const char* what) {
  TESSERA_CHECK(s.batch >= 0 && s.heads >= 1 && s.dim >= 1 && s.slices >= 1 && s.points >= 0,
                what << ": shape N " << s.batch << " H " << s.heads << " D " << s.dim << " M "
                     << s.slices << " P " << s.points);
  return true;
}

// y[m, i] = sum_j x[m, j] w[i, j] (+= when add), all (rows, D) / (D, D) float64.
void project(Index rows, Index D, const double* x, const double* w, double* y) {
  for (Index m = 0; m < rows; ++m)
    for (Index i = 0; i < D; ++i) {
      double s = 0;
      for (Index j = 0; j < D; ++j) s += x[m * D + j] * w[i * D + j];
      y[m * D + i] = s;
    }
}

}  // namespace

void physics_slice(const Device& dev, DType t, const PhysicsShape& s, const void* x,
                   const SliceParams& p, void* w, double* acc) {
  check(s, "physics_slice");
  if (dev.is_host()) return cpu::physics_slice(t, s, x, p, w, acc);
  if constexpr (kCudaEnabled) return cuda::physics_slice(dev, t, s, x, p, w, acc);
  throw_without_cuda("physics_slice");
}

void physics_deslice(const Device& dev, DType t, const PhysicsShape& s, const void* w,
                     const double* o, void* y) {
  check(s, "physics_deslice");
  if (dev.is_host()) return cpu::physics_deslice(t, s, w, o, y);
  if constexpr (kCudaEnabled) return cuda::physics_deslice(dev, t, s, w, o, y);
  throw_without_cuda("physics_deslice");
}

void physics_deslice_grad(const Device& dev, DType t, const PhysicsShape& s, const void* w,
                          const void* dy, double* d_o) {
  check(s, "physics_deslice_grad");
  if (dev.is_host()) return cpu::physics_deslice_grad(t, s, w, dy, d_o);
  if constexpr (kCudaEnabled) return cuda::physics_deslice_grad(dev, t, s, w, dy, d_o);
  throw_without_cuda("physics_deslice_grad");
}

void physics_slice_backward(const Device& dev, DType t, const PhysicsShape& s, const SliceParams& p,
                            const SliceBackward& b) {
  check(s, "physics_slice_backward");
  if (dev.is_host()) return cpu::physics_slice_backward(t, s, p, b);
  if constexpr (kCudaEnabled) return cuda::physics_slice_backward(dev, t, s, p, b);
  throw_without_cuda("physics_slice_backward");
}

namespace {
AttentionDesc token_attention(const PhysicsShape& s) {
  AttentionDesc a;
  a.batch = s.batch * s.heads;
  a.sq = a.sk = s.slices;
  a.d = s.dim;
  a.type = DType::f64;
  return a;
}
}  // namespace

void physics_tokens_forward(const PhysicsShape& s, const double* acc, const double* wq,
                            const double* wk, const double* wv, const SliceTokens& out) {
  const Index B = s.batch * s.heads, M = s.slices, D = s.dim;
  for (Index b = 0; b < B; ++b)
    for (Index m = 0; m < M; ++m) {
      const double* am = acc + (b * M + m) * (D + 1);
      const double inv = 1.0 / (am[D] + out.eps);
      for (Index d = 0; d < D; ++d) out.t[(b * M + m) * D + d] = am[d] * inv;
    }
  project(B * M, D, out.t, wq, out.q);
  project(B * M, D, out.t, wk, out.k);
  project(B * M, D, out.t, wv, out.v);
  if (B * M == 0) return;
  attention_forward(Device::host(), token_attention(s), out.q, out.k, out.v, out.o, out.lse);
}

void physics_tokens_backward(const PhysicsShape& s, const double* acc, const double* wq,
                             const double* wk, const double* wv, const SliceTokens& saved,
                             const double* d_o, double* da, double* dz, double* dwq, double* dwk,
                             double* dwv) {
  const Index B = s.batch * s.heads, M = s.slices, D = s.dim, n = B * M * D;
  std::vector<double> dq(static_cast<std::size_t>(n)), dk(dq.size()), dv(dq.size()), dt(dq.size());
  if (n > 0)
    attention_backward(Device::host(), token_attention(s), saved.q, saved.k, saved.v, saved.o, d_o,
                       saved.lse, dq.data(), dk.data(), dv.data());
  // q = T Wq^T: dWq[i, j] += sum_rows dq[r, i] T[r, j]; dT[r, j] = sum_i dq[r, i] Wq[i, j].
  const std::pair<const double*, double*> proj[3] = {{wq, dwq}, {wk, dwk}, {wv, dwv}};
  const std::vector<double>* grads[3] = {&dq, &dk, &dv};
  for (int c = 0; c < 3; ++c) {
    const double* g = grads[c]->data();
    const auto [w, dw] = proj[c];
    for (Index r = 0; r < B * M; ++r)
      for (Index i = 0; i < D; ++i) {
        const double gi = g[r * D + i];
        for (Index j = 0; j < D; ++j) {
          dw[i * D + j] += gi * saved.t[r * D + j];
          dt[static_cast<std::size_t>(r * D + j)] += gi * w[i * D + j];
        }
      }
  }
  // T = A / (Z + eps): dA = dT / (Z + eps), dZ = -sum_d dT A / (Z + eps)^2.
  for (Index r = 0; r < B * M; ++r) {
    const double* am = acc + r * (D + 1);
    const double inv = 1.0 / (am[D] + saved.eps);
    double z = 0;
    for (Index d = 0; d < D; ++d) {
      const double g = dt[static_cast<std::size_t>(r * D + d)];
      da[r * D + d] = g * inv;
      z -= g * am[d] * inv * inv;
    }
    dz[r] = z;
  }
}

}  // namespace tessera::kernels
