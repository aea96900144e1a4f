#pragma once
// Transolver's physics attention, the local pieces (Wu et al. 2024, "Physics-Attention"):
// every point (token) is softly assigned to M slices, the slices become M tokens (weighted
// means of the points' features), attention runs among those few tokens, and each point
// reads its slices' results back with the same weights. Per sample n and head h, with the
// point's projected features a_p (slice input) and f_p (values), both of D channels:
//
//   w[m, p] = softmax_m((ws[m, :] . a_p + bs[m]) / tau[h])        slice weights
//   A[m, :] = sum_p w[m, p] f_p,  Z[m] = sum_p w[m, p]           sums over the points
//   T[m, :] = A[m, :] / (Z[m] + eps)                             slice tokens
//   O       = attention(T Wq^T, T Wk^T, T Wv^T)                   among the M tokens
//   y_p     = sum_m w[m, p] O[m, :]                               de-slice
//
// The point passes (slice, deslice and their adjoints) are the heavy part and run here per
// block of points: A and Z (and the output's dO in backward) come out as this block's
// partial sums, which the caller sums over the ranks holding the other points. The token
// part is tiny (M x D per head) and replicated: float64 on the host, always. The point
// passes run on the host or a CUDA device (the point arrays' device); the slice parameters
// and per-token arrays are host float64 either way.
//
// Layouts (channel-first, tokens flattened to P contiguous): x (N, 2 H D, P) with the slice
// inputs a in channels [h D, h D + D) and the values f in [H D + h D, H D + h D + D); w
// (N, H, M, P); y and dy (N, H D, P); per-token tensors (N, H, M, D) float64. Partial sums
// over the points are reduced in fixed blocks of points in order, so results do not depend
// on the thread count.
#include "kernels/floor.hpp"
#include "decomp/dtype.hpp"
#include "decomp/index.hpp"
#include "kernels/device/device.hpp"

namespace tessera::kernels {

struct PhysicsShape {
  Index batch = 0, heads = 0, dim = 0, slices = 0, points = 0;  // N, H, D, M, P
};

// The slice parameters, float64 on the host: ws (M, D), bs (M), tau (H).
struct SliceParams {
  const double* ws = nullptr;
  const double* bs = nullptr;
  const double* tau = nullptr;
};

// w (N, H, M, P) in the element type; acc (N, H, M, D + 1) float64 overwritten with this
// block's [sum_p w f, sum_p w].
void physics_slice(const Device& dev, DType t, const PhysicsShape& s, const void* x,
                   const SliceParams& p, void* w, double* acc);
// y (N, H D, P) = sum_m w[m, p] O[m, :], O (N, H, M, D) float64.
void physics_deslice(const Device& dev, DType t, const PhysicsShape& s, const void* w,
                     const double* o, void* y);
// dO (N, H, M, D) float64 overwritten with this block's sum_p w[m, p] dy_p.
void physics_deslice_grad(const Device& dev, DType t, const PhysicsShape& s, const void* w,
                          const void* dy, double* d_o);

// The adjoint of slice + deslice for one block of points, from the token-level gradients
// dA (N, H, M, D) and dZ (N, H, M) (of the summed A and Z) and the output gradient dy:
// dx (N, 2 H D, P) overwritten; the slice parameters' gradients of this block added into
// dws (M, D), dbs (M), dtau (H), float64.
struct SliceBackward {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  const double* o = nullptr;
  const double* da = nullptr;
  const double* dz = nullptr;
  void* dx = nullptr;
  double* dws = nullptr;
  double* dbs = nullptr;
  double* dtau = nullptr;
};
void physics_slice_backward(const Device& dev, DType t, const PhysicsShape& s, const SliceParams& p,
                            const SliceBackward& b);

// The token part, float64 on the host. Forward: from the summed acc (N, H, M, D + 1) and
// the projections wq, wk, wv (D, D) (y = x W^T, shared by the heads), the tokens T, q, k, v,
// the output O (N, H, M, D) and the attention's lse (N H, M).
struct SliceTokens {
  double eps = 1e-5;
  double* t = nullptr;
  double* q = nullptr;
  double* k = nullptr;
  double* v = nullptr;
  double* o = nullptr;
  double* lse = nullptr;
};
void physics_tokens_forward(const PhysicsShape& s, const double* acc, const double* wq,
                            const double* wk, const double* wv, const SliceTokens& out);
// Backward from dO (N, H, M, D): dA (N, H, M, D), dZ (N, H, M) overwritten; dwq, dwk, dwv
// (D, D) added to.
void physics_tokens_backward(const PhysicsShape& s, const double* acc, const double* wq,
                             const double* wk, const double* wv, const SliceTokens& saved,
                             const double* d_o, double* da, double* dz, double* dwq, double* dwk,
                             double* dwv);

namespace cpu {
void physics_slice(DType t, const PhysicsShape& s, const void* x, const SliceParams& p, void* w,
                   double* acc);
void physics_deslice(DType t, const PhysicsShape& s, const void* w, const double* o, void* y);
void physics_deslice_grad(DType t, const PhysicsShape& s, const void* w, const void* dy,
                          double* d_o);
void physics_slice_backward(DType t, const PhysicsShape& s, const SliceParams& p,
                            const SliceBackward& b);
}  // namespace cpu
// CUDA: the point arrays (x, w, y, dy, dx) on the device; the slice parameters and the
// per-token float64 arrays (acc, o, d_o, da, dz, dws, dbs, dtau) stay host pointers.
namespace cuda {
void physics_slice(const Device& dev, DType t, const PhysicsShape& s, const void* x,
                   const SliceParams& p, void* w, double* acc);
void physics_deslice(const Device& dev, DType t, const PhysicsShape& s, const void* w,
                     const double* o, void* y);
void physics_deslice_grad(const Device& dev, DType t, const PhysicsShape& s, const void* w,
                          const void* dy, double* d_o);
void physics_slice_backward(const Device& dev, DType t, const PhysicsShape& s, const SliceParams& p,
                            const SliceBackward& b);
}  // namespace cuda

}  // namespace tessera::kernels
