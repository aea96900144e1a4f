#pragma once
// Normalization apply and backward for GroupNorm, BatchNorm and channel LayerNorm on a
// contiguous (n, c, inner) tensor, one function set for all three: the StatLayout says
// which statistics group each cell belongs to (kernels/stat_layout.hpp). Statistics are
// computed by the caller from global reductions (stat_sums, then a sum over ranks):
// mean[g] and rstd[g] = 1/sqrt(var[g] + eps), l.count() doubles each.
//
//   forward:  xhat = (x - mean[g]) * rstd[g],  y = xhat * gamma[c] + beta[c]
//   backward: with S1[g] = sum(dy * gamma) and S2[g] = sum(dy * gamma * xhat) summed over
//             the *global* group of M cells (norm_backward_sums gives the local part),
//             dx = rstd * (dy * gamma - (S1 + xhat * S2) / M);
//             dgamma[c] = sum dy * xhat, dbeta[c] = sum dy (local parts, over n and space).
// gamma and beta (c entries, element type) may be nullptr: gamma = 1, beta = 0.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include "decomp/box.hpp"
#include "decomp/dtype.hpp"
#include "kernels/stat_layout.hpp"

namespace tessera::kernels {

struct NormArgs {
  StatLayout layout;
  DType type = DType::f32;
  const double* mean = nullptr;  // layout.count() entries
  const double* rstd = nullptr;
  const void* gamma = nullptr;  // c entries or nullptr
  const void* beta = nullptr;   // c entries or nullptr (forward only)
};

void norm_forward(const Device& dev, const NormArgs& a, const void* x, void* y);
// Local s1[g] = sum(dy * gamma), s2[g] = sum(dy * gamma * xhat) (overwritten).
void norm_backward_sums(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                        double* s1, double* s2);
// dx (overwritten; may alias dy) from the globally summed S1, S2 and the global group size M.
void norm_backward_dx(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                      const double* S1, const double* S2, double M, void* dx);
// Local dgamma[c] = sum dy * xhat, dbeta[c] = sum dy (overwritten, c doubles; either may be
// nullptr).
void norm_param_grads(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                      double* dgamma, double* dbeta);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void norm_forward(const NormArgs& a, const void* x, void* y);
void norm_backward_sums(const NormArgs& a, const void* x, const void* dy, double* s1, double* s2);
void norm_backward_dx(const NormArgs& a, const void* x, const void* dy, const double* S1,
                      const double* S2, double M, void* dx);
void norm_param_grads(const NormArgs& a, const void* x, const void* dy, double* dgamma,
                      double* dbeta);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void norm_forward(const Device& dev, const NormArgs& a, const void* x, void* y);
void norm_backward_sums(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                        double* s1, double* s2);
void norm_backward_dx(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                      const double* S1, const double* S2, double M, void* dx);
void norm_param_grads(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                      double* dgamma, double* dbeta);
}  // namespace cuda

}  // namespace tessera::kernels
