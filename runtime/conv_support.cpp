#include "runtime/conv_support.hpp"

#include <cmath>
#include <random>

#include "kernels/bias.hpp"
#include "runtime/error.hpp"
#include "runtime/window_layout.hpp"

namespace tessera::conv_support {

std::vector<Index> per_dim(const std::vector<Index>& v, int nd, const char* what,
                           const char* layer) {
  TESSERA_CHECK(v.size() == 1 || static_cast<int>(v.size()) == nd,
                layer << ": " << what << " needs 1 or " << nd << " entries, got " << v.size());
  return v.size() == 1 ? std::vector<Index>(nd, v[0]) : v;
}

kernels::Scalar scalar_of(DType t, const char* layer) {
  TESSERA_CHECK(t == DType::f32 || t == DType::f64,
                layer << ": float32 or float64 tensors only, got " << name_of(t));
  return t == DType::f64 ? kernels::Scalar::F64 : kernels::Scalar::F32;
}

void set_x_window(kernels::ConvDesc& desc, const Tensor& w) {
  TESSERA_CHECK(w.ndim() == desc.nd + 2,
                "conv window: rank " << w.ndim() << " for a conv" << desc.nd << "d");
  desc.n = w.shape(0);
  for (int d = 0; d < desc.nd; ++d) desc.in[d] = w.shape(2 + d);
  for (int i = 0; i < 5; ++i) desc.x_strides[i] = 0;
  if (!w.is_contiguous())
    for (int i = 0; i < w.ndim(); ++i) desc.x_strides[i] = w.strides()[i];
}

void forward(MemSpace s, const kernels::ConvDesc& d, const void* x, const void* w, const void* bias,
             void* y) {
  if (s == MemSpace::Cuda)
    kernels::conv_forward_cuda(d, x, w, bias, y);
  else
    kernels::conv_forward_cpu(d, x, w, bias, y);
}
void backward_data(MemSpace s, const kernels::ConvDesc& d, const void* dy, const void* w,
                   void* dx) {
  if (s == MemSpace::Cuda)
    kernels::conv_backward_data_cuda(d, dy, w, dx);
  else
    kernels::conv_backward_data_cpu(d, dy, w, dx);
}
void backward_weights(MemSpace s, const kernels::ConvDesc& d, const void* x, const void* dy,
                      void* dw, void* dbias) {
  if (s == MemSpace::Cuda)
    kernels::conv_backward_weights_cuda(d, x, dy, dw, dbias);
  else
    kernels::conv_backward_weights_cpu(d, x, dy, dw, dbias);
}

namespace {
Index inner_of(const Tensor& t) {
  Index inner = 1;
  for (int i = 2; i < t.ndim(); ++i) inner *= t.shape(i);
  return inner;
}
}  // namespace

void bias_add(MemSpace s, kernels::Scalar t, const Tensor& y, const Tensor& b) {
  if (y.numel() == 0) return;
  if (s == MemSpace::Cuda)
    kernels::bias_add_cuda(t, y.shape(0), y.shape(1), inner_of(y), y.raw(), b.raw());
  else
    kernels::bias_add_cpu(t, y.shape(0), y.shape(1), inner_of(y), y.raw(), b.raw());
}
void bias_grad(MemSpace s, kernels::Scalar t, const Tensor& dy, const Tensor& db) {
  if (dy.numel() == 0) {
    db.zero();
    return;
  }
  if (s == MemSpace::Cuda)
    kernels::bias_backward_cuda(t, dy.shape(0), dy.shape(1), inner_of(dy), dy.raw(), db.raw());
  else
    kernels::bias_backward_cpu(t, dy.shape(0), dy.shape(1), inner_of(dy), dy.raw(), db.raw());
}

Parameter make_param(const std::string& name, const std::vector<Index>& shape, DType t,
                     MemSpace s) {
  return Parameter{name, Tensor::zeros(shape, t, s), Tensor::zeros(shape, t, s)};
}

namespace {
void fill_uniform(const Tensor& t, std::mt19937_64& rng, double bound) {
  std::uniform_real_distribution<double> u(-bound, bound);
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  for (Index i = 0; i < h.numel(); ++i) {
    const double v = u(rng);
    if (t.dtype() == DType::f64)
      h.data<double>()[i] = v;
    else
      h.data<float>()[i] = static_cast<float>(v);
  }
  t.copy_from(h);
}

template <class T>
void add_into(const Tensor& acc, const Tensor& x) {
  T* a = acc.data<T>();
  const T* b = x.data<T>();
  for (Index i = 0; i < acc.numel(); ++i) a[i] += b[i];
}
}  // namespace

void init_uniform(Parameter& weight, Parameter* bias, Index fan_in, unsigned seed) {
  std::mt19937_64 rng(seed);
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  fill_uniform(weight.value, rng, bound);
  if (bias) fill_uniform(bias->value, rng, bound);
}

void accumulate_grad(Parameter& p, const Tensor& local, const Mesh& mesh, const ShardSpec& spec,
                     bool reduce) {
  const Tensor host = local.space() == MemSpace::Host ? local : local.to(MemSpace::Host);
  if (reduce) sum_over_axes(mesh, sharding_axes(spec), host);
  const Tensor acc = p.grad.space() == MemSpace::Host ? p.grad : p.grad.to(MemSpace::Host);
  if (acc.dtype() == DType::f64)
    add_into<double>(acc, host);
  else
    add_into<float>(acc, host);
  if (p.grad.space() != MemSpace::Host) p.grad.copy_from(acc);
}

}  // namespace tessera::conv_support
