#pragma once
// Element-wise arithmetic and reductions on contiguous arrays, host and CUDA: what the
// training runtime needs around the layers (gradient accumulation, residual additions,
// gradient scaling, norms, loss sums). Reductions accumulate in double in a fixed
// order, so a result is reproducible run to run on the same device.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include <cstdint>

#include "decomp/dtype.hpp"

namespace tessera::kernels {

using Count = std::int64_t;

// y[i] += alpha * x[i]
void axpy(const Device& dev, DType s, Count n, double alpha, const void* x, void* y);
// y[i] += x[i], x float64, y of type s (kernels that accumulate in double feed a
// float32 or float64 gradient without leaving the device)
void add_f64(const Device& dev, DType s, Count n, const double* x, void* y);
// y[i] *= alpha
void scale(const Device& dev, DType s, Count n, double alpha, void* y);
// out[i] = alpha * (a[i] - b[i])
void scaled_diff(const Device& dev, DType s, Count n, double alpha, const void* a, const void* b,
                 void* out);
// sum_i x[i]^2
double sum_squares(const Device& dev, DType s, Count n, const void* x);
// sum_i (a[i] - b[i])^2
double sum_sq_diff(const Device& dev, DType s, Count n, const void* a, const void* b);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void axpy(DType s, Count n, double alpha, const void* x, void* y);
void add_f64(DType s, Count n, const double* x, void* y);
void scale(DType s, Count n, double alpha, void* y);
void scaled_diff(DType s, Count n, double alpha, const void* a, const void* b, void* out);
double sum_squares(DType s, Count n, const void* x);
double sum_sq_diff(DType s, Count n, const void* a, const void* b);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void axpy(const Device& dev, DType s, Count n, double alpha, const void* x, void* y);
void add_f64(const Device& dev, DType s, Count n, const double* x, void* y);
void scale(const Device& dev, DType s, Count n, double alpha, void* y);
void scaled_diff(const Device& dev, DType s, Count n, double alpha, const void* a, const void* b,
                 void* out);
double sum_squares(const Device& dev, DType s, Count n, const void* x);
double sum_sq_diff(const Device& dev, DType s, Count n, const void* a, const void* b);
}  // namespace cuda

}  // namespace tessera::kernels
