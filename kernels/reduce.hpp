#pragma once
// Local reductions accumulated in double: whole-array sum, mean and sum of squares, and
// per-statistics-group sums and sums of squares (per channel for BatchNorm, per (n, group)
// for GroupNorm, any StatLayout) that a sharded layer then sums over ranks.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include "decomp/box.hpp"
#include "decomp/dtype.hpp"
#include "kernels/stat_layout.hpp"

namespace tessera::kernels {

double reduce_sum(const Device& dev, DType type, Index n, const void* x);
double reduce_mean(const Device& dev, DType type, Index n, const void* x);
double reduce_sum_squares(const Device& dev, DType type, Index n, const void* x);

// sum[g] = sum of x over group g, sumsq[g] = sum of x^2 (both overwritten, l.count()
// entries; sumsq may be nullptr). x contiguous (n, c, inner).
void stat_sums(const Device& dev, const StatLayout& l, DType type, const void* x, double* sum,
               double* sumsq);
// stat_sums for the two common layouts: c entries, and n * groups entries.
void channel_sums(const Device& dev, DType type, Index n, Index c, Index inner, const void* x,
                  double* sum, double* sumsq);
void group_sums(const Device& dev, DType type, Index n, Index c, Index groups, Index inner,
                const void* x, double* sum, double* sumsq);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
double reduce_sum(DType type, Index n, const void* x);
double reduce_mean(DType type, Index n, const void* x);
double reduce_sum_squares(DType type, Index n, const void* x);
void stat_sums(const StatLayout& l, DType type, const void* x, double* sum, double* sumsq);
void channel_sums(DType type, Index n, Index c, Index inner, const void* x, double* sum,
                  double* sumsq);
void group_sums(DType type, Index n, Index c, Index groups, Index inner, const void* x, double* sum,
                double* sumsq);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
double reduce_sum(const Device& dev, DType type, Index n, const void* x);
double reduce_mean(const Device& dev, DType type, Index n, const void* x);
double reduce_sum_squares(const Device& dev, DType type, Index n, const void* x);
void stat_sums(const Device& dev, const StatLayout& l, DType type, const void* x, double* sum,
               double* sumsq);
void channel_sums(const Device& dev, DType type, Index n, Index c, Index inner, const void* x,
                  double* sum, double* sumsq);
void group_sums(const Device& dev, DType type, Index n, Index c, Index groups, Index inner,
                const void* x, double* sum, double* sumsq);
}  // namespace cuda

}  // namespace tessera::kernels
