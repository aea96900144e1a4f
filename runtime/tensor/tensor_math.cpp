#include "runtime/tensor/tensor_math.hpp"

#include "kernels/convert.hpp"
#include "kernels/elementwise.hpp"

namespace tessera {
namespace {

DType scalar_of(const Tensor& t, const char* where) {
  TESSERA_CHECK(t.defined(), where << ": tensor is undefined");
  TESSERA_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64,
                where << ": needs float32 or float64, got " << name_of(t.dtype()));
  TESSERA_CHECK(t.is_contiguous(), where << ": needs a contiguous tensor");
  return t.dtype();
}

void check_like(const Tensor& a, const Tensor& b, const char* where) {
  TESSERA_CHECK(a.shape() == b.shape(), where << ": shapes " << shape_str(a.shape()) << " and "
                                              << shape_str(b.shape()) << " differ");
  TESSERA_CHECK(a.dtype() == b.dtype(), where << ": dtypes " << name_of(a.dtype()) << " and "
                                              << name_of(b.dtype()) << " differ");
  TESSERA_CHECK(a.space() == b.space(), where << ": tensors in " << name_of(a.space()) << " and "
                                              << name_of(b.space()) << " memory");
}

}  // namespace

void add_into(const Tensor& y, const Tensor& x, double alpha) {
  const auto s = scalar_of(y, "add_into");
  scalar_of(x, "add_into");
  check_like(y, x, "add_into");
  kernels::axpy(y.device(), s, y.numel(), alpha, x.raw(), y.raw());
}

Tensor converted(const Tensor& x, DType to) {
  if (x.dtype() == to) return x;
  TESSERA_CHECK(kernels::convertible(x.dtype(), to),
                "converted: no conversion from " << name_of(x.dtype()) << " to " << name_of(to));
  const Tensor c = x.contiguous();
  Tensor y = Tensor::empty(c.shape(), to, c.space());
  kernels::convert(c.device(), c.dtype(), to, c.numel(), c.raw(), y.raw());
  return y;
}

DType compute_type(DType storage) {
  return storage == DType::bf16 ? DType::f32 : storage;
}

void add_f64_into(const Tensor& y, const Tensor& x) {
  const auto s = scalar_of(y, "add_f64_into");
  scalar_of(x, "add_f64_into");
  TESSERA_CHECK(x.dtype() == DType::f64, "add_f64_into: x is " << name_of(x.dtype()));
  TESSERA_CHECK(x.shape() == y.shape() && x.space() == y.space(),
                "add_f64_into: shapes " << shape_str(y.shape()) << " and " << shape_str(x.shape())
                                        << " or memory spaces differ");
  kernels::add_f64(y.device(), s, y.numel(), x.data<double>(), y.raw());
}

void scale_inplace(const Tensor& y, double alpha) {
  const auto s = scalar_of(y, "scale_inplace");
  kernels::scale(y.device(), s, y.numel(), alpha, y.raw());
}

void scaled_diff(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  const auto s = scalar_of(out, "scaled_diff");
  scalar_of(a, "scaled_diff");
  scalar_of(b, "scaled_diff");
  check_like(out, a, "scaled_diff");
  check_like(a, b, "scaled_diff");
  kernels::scaled_diff(out.device(), s, out.numel(), alpha, a.raw(), b.raw(), out.raw());
}

double sum_squares(const Tensor& x) {
  const auto s = scalar_of(x, "sum_squares");
  return kernels::sum_squares(x.device(), s, x.numel(), x.raw());
}

double sum_sq_diff(const Tensor& a, const Tensor& b) {
  const auto s = scalar_of(a, "sum_sq_diff");
  scalar_of(b, "sum_sq_diff");
  check_like(a, b, "sum_sq_diff");
  return kernels::sum_sq_diff(a.device(), s, a.numel(), a.raw(), b.raw());
}

}  // namespace tessera
