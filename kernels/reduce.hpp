#pragma once
// Local reductions accumulated in double: whole-array sum, mean and sum of squares, and
// per-statistics-group sums and sums of squares (per channel for BatchNorm, per (n, group)
// for GroupNorm, any StatLayout) that a sharded layer then sums over ranks.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/dtype.hpp"
#include "kernels/stat_layout.hpp"

namespace tessera::kernels {

double reduce_sum_cpu(DType type, Index n, const void* x);
double reduce_mean_cpu(DType type, Index n, const void* x);  // n == 0: throws
double reduce_sum_squares_cpu(DType type, Index n, const void* x);

// sum[g] = sum of x over group g, sumsq[g] = sum of x^2 (both overwritten, l.count()
// entries; sumsq may be nullptr). x contiguous (n, c, inner).
void stat_sums_cpu(const StatLayout& l, DType type, const void* x, double* sum, double* sumsq);
// stat_sums for the two common layouts: c entries, and n * groups entries.
void channel_sums_cpu(DType type, Index n, Index c, Index inner, const void* x, double* sum,
                      double* sumsq);
void group_sums_cpu(DType type, Index n, Index c, Index groups, Index inner, const void* x,
                    double* sum, double* sumsq);

// CUDA versions: x, sum and sumsq are device pointers; the scalar results come back to
// the host. Synchronous on the default stream.
double reduce_sum_cuda(DType type, Index n, const void* x);
double reduce_mean_cuda(DType type, Index n, const void* x);
double reduce_sum_squares_cuda(DType type, Index n, const void* x);
void stat_sums_cuda(const StatLayout& l, DType type, const void* x, double* sum, double* sumsq);
void channel_sums_cuda(DType type, Index n, Index c, Index inner, const void* x, double* sum,
                       double* sumsq);
void group_sums_cuda(DType type, Index n, Index c, Index groups, Index inner, const void* x,
                     double* sum, double* sumsq);

}  // namespace tessera::kernels
