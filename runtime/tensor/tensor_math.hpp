#pragma once
// Element-wise arithmetic on whole tensors (host or CUDA memory, float32/float64,
// contiguous): the glue the training runtime needs between layers. Reductions return
// double, accumulated in double in a fixed order.
#include "runtime/floor.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

// y += alpha * x (same shape, dtype and memory space).
void add_into(const Tensor& y, const Tensor& x, double alpha = 1.0);
// y += x for a float64 x of y's shape and memory space (y float32 or float64).
void add_f64_into(const Tensor& y, const Tensor& x);
// y *= alpha
void scale_inplace(const Tensor& y, double alpha);
// out = alpha * (a - b)
void scaled_diff(const Tensor& out, const Tensor& a, const Tensor& b, double alpha);
double sum_squares(const Tensor& x);
// x in element type `to` (itself when it already is; otherwise a contiguous copy in x's
// memory space): float32 <-> bfloat16 and float32 <-> float64.
Tensor converted(const Tensor& x, DType to);
// The type arithmetic on `storage` runs in: float32 for bfloat16, the type itself otherwise.
DType compute_type(DType storage);
double sum_sq_diff(const Tensor& a, const Tensor& b);

}  // namespace tessera
