#pragma once
// Element-wise arithmetic and reductions on contiguous arrays, host and CUDA: what the
// training runtime needs around the layers (gradient accumulation, residual additions,
// gradient scaling, norms, loss sums). Reductions accumulate in double in a fixed
// order, so a result is reproducible run to run on the same device.
#include "kernels/floor.hpp"
#include <cstdint>

#include "decomp/dtype.hpp"

namespace tessera::kernels {

using Count = std::int64_t;

// y[i] += alpha * x[i]
void axpy_host(DType s, Count n, double alpha, const void* x, void* y);
// y[i] += x[i], x float64, y of type s (kernels that accumulate in double feed a
// float32 or float64 gradient without leaving the device)
void add_f64_host(DType s, Count n, const double* x, void* y);
// y[i] *= alpha
void scale_host(DType s, Count n, double alpha, void* y);
// out[i] = alpha * (a[i] - b[i])
void scaled_diff_host(DType s, Count n, double alpha, const void* a, const void* b, void* out);
// sum_i x[i]^2
double sum_squares_host(DType s, Count n, const void* x);
// sum_i (a[i] - b[i])^2
double sum_sq_diff_host(DType s, Count n, const void* a, const void* b);

// CUDA versions: device pointers, synchronous on the default stream. Throw when
// Tessera was built without CUDA.
void axpy_cuda(DType s, Count n, double alpha, const void* x, void* y);
void add_f64_cuda(DType s, Count n, const double* x, void* y);
void scale_cuda(DType s, Count n, double alpha, void* y);
void scaled_diff_cuda(DType s, Count n, double alpha, const void* a, const void* b, void* out);
double sum_squares_cuda(DType s, Count n, const void* x);
double sum_sq_diff_cuda(DType s, Count n, const void* a, const void* b);

}  // namespace tessera::kernels
