#pragma once
// Small host-only float64 layers with hand-derived backward, for testing the layer
// graph, gradient synchronisation and training loops without the real sharded layers.
// Both are pointwise in space, so they need no halo: any sharding of (N, C, ...) with C
// unsharded works.
//   ChannelScale: y[n,c,s] = w[c] * x[n,c,s]
//   ChannelMix:   y[n,o,s] = sum_c W[o,c] x[n,c,s] + b[o]
#include <string>
#include <vector>

#include "runtime/nn/layer.hpp"

namespace tessera::test {

// Mesh axes that shard any dim of `spec`.
inline std::vector<int> sharding_axes(const ShardSpec& spec) {
  std::vector<int> axes;
  for (const Placement& p : spec.placements())
    if (p.sharded()) axes.push_back(p.axis);
  return axes;
}

inline Index spatial_size(const Tensor& t) {
  Index s = 1;
  for (int d = 2; d < t.ndim(); ++d) s *= t.shape(d);
  return s;
}

class ChannelScale : public Layer {
 public:
  explicit ChannelScale(const std::vector<double>& w) {
    const auto c = static_cast<Index>(w.size());
    p_.name = "weight";
    p_.value = Tensor::empty({c}, DType::f64);
    p_.grad = Tensor::zeros({c}, DType::f64);
    for (Index i = 0; i < c; ++i) p_.value.data<double>()[i] = w[static_cast<std::size_t>(i)];
  }
  ShardSpec output_spec(const ShardSpec& in) const override {
    TESSERA_CHECK(in.global_shape().at(1) == p_.value.numel(), "ChannelScale: channels");
    return in;
  }
  ShardTensor forward(const ShardTensor& x) override {
    x_ = x;
    const Tensor in = x.local().contiguous();
    Tensor out = Tensor::empty(in.shape(), DType::f64);
    apply(in, out, p_.value);
    return ShardTensor::unchecked(x.mesh(), x.spec(), out);
  }
  ShardTensor backward(const ShardTensor& dy) override {
    const Tensor g = dy.local().contiguous(), in = x_.local().contiguous();
    Tensor dx = Tensor::empty(g.shape(), DType::f64);
    apply(g, dx, p_.value);
    Tensor dw = Tensor::zeros(p_.value.shape(), DType::f64);
    const Index n = g.ndim() ? g.shape(0) : 0, c = p_.value.numel(), s = spatial_size(g);
    for (Index i = 0; i < n; ++i)
      for (Index k = 0; k < c; ++k)
        for (Index j = 0; j < s; ++j)
          dw.data<double>()[k] +=
              g.data<double>()[(i * c + k) * s + j] * in.data<double>()[(i * c + k) * s + j];
    p_.grad_axes = sharding_axes(dy.spec());  // local contribution: GradSync sums it
    for (Index k = 0; k < c; ++k) p_.grad.data<double>()[k] += dw.data<double>()[k];
    return ShardTensor::unchecked(dy.mesh(), x_.spec(), dx);
  }
  std::vector<Parameter*> parameters() override { return {&p_}; }
  std::string name() const override { return "ChannelScale"; }

 private:
  static void apply(const Tensor& in, const Tensor& out, const Tensor& w) {
    const Index n = in.shape(0), c = w.numel(), s = spatial_size(in);
    for (Index i = 0; i < n; ++i)
      for (Index k = 0; k < c; ++k)
        for (Index j = 0; j < s; ++j)
          out.data<double>()[(i * c + k) * s + j] =
              w.data<double>()[k] * in.data<double>()[(i * c + k) * s + j];
  }
  Parameter p_;
  ShardTensor x_;
};

class ChannelMix : public Layer {
 public:
  // W: cout x cin row-major, b: cout.
  ChannelMix(Index cin, Index cout, const std::vector<double>& W, const std::vector<double>& b)
      : cin_(cin), cout_(cout) {
    w_.name = "weight";
    w_.value = Tensor::empty({cout, cin}, DType::f64);
    w_.grad = Tensor::zeros({cout, cin}, DType::f64);
    b_.name = "bias";
    b_.value = Tensor::empty({cout}, DType::f64);
    b_.grad = Tensor::zeros({cout}, DType::f64);
    for (Index i = 0; i < cout * cin; ++i)
      w_.value.data<double>()[i] = W[static_cast<std::size_t>(i)];
    for (Index i = 0; i < cout; ++i) b_.value.data<double>()[i] = b[static_cast<std::size_t>(i)];
  }
  ShardSpec output_spec(const ShardSpec& in) const override {
    TESSERA_CHECK(in.ndim() >= 2 && in.global_shape()[1] == cin_,
                  "ChannelMix: expects " << cin_ << " channels, got " << in.str());
    auto shape = in.global_shape();
    shape[1] = cout_;
    std::vector<std::vector<Index>> sizes(static_cast<std::size_t>(in.ndim()));
    for (int d = 0; d < in.ndim(); ++d)
      if (in.placement(d).sharded()) sizes[static_cast<std::size_t>(d)] = in.sizes(d);
    return ShardSpec(shape, in.placements(), in.mesh_dims(), {}, sizes);
  }
  ShardTensor forward(const ShardTensor& x) override {
    x_ = x;
    const Tensor in = x.local().contiguous();
    auto shape = in.shape();
    shape[1] = cout_;
    Tensor out = Tensor::empty(shape, DType::f64);
    const Index n = in.shape(0), s = spatial_size(in);
    const double* W = w_.value.data<double>();
    for (Index i = 0; i < n; ++i)
      for (Index o = 0; o < cout_; ++o)
        for (Index j = 0; j < s; ++j) {
          double acc = b_.value.data<double>()[o];
          for (Index c = 0; c < cin_; ++c)
            acc += W[o * cin_ + c] * in.data<double>()[(i * cin_ + c) * s + j];
          out.data<double>()[(i * cout_ + o) * s + j] = acc;
        }
    return ShardTensor::unchecked(x.mesh(), output_spec(x.spec()), out);
  }
  ShardTensor backward(const ShardTensor& dy) override {
    const Tensor g = dy.local().contiguous(), in = x_.local().contiguous();
    Tensor dx = Tensor::zeros(in.shape(), DType::f64);
    Tensor dW = Tensor::zeros(w_.value.shape(), DType::f64);
    Tensor db = Tensor::zeros(b_.value.shape(), DType::f64);
    const Index n = in.shape(0), s = spatial_size(in);
    const double* W = w_.value.data<double>();
    for (Index i = 0; i < n; ++i)
      for (Index o = 0; o < cout_; ++o)
        for (Index j = 0; j < s; ++j) {
          const double gy = g.data<double>()[(i * cout_ + o) * s + j];
          db.data<double>()[o] += gy;
          for (Index c = 0; c < cin_; ++c) {
            dx.data<double>()[(i * cin_ + c) * s + j] += W[o * cin_ + c] * gy;
            dW.data<double>()[o * cin_ + c] += gy * in.data<double>()[(i * cin_ + c) * s + j];
          }
        }
    w_.grad_axes = b_.grad_axes = sharding_axes(x_.spec());  // local: GradSync sums them
    add(w_.grad, dW);
    add(b_.grad, db);
    return ShardTensor::unchecked(dy.mesh(), x_.spec(), dx);
  }
  std::vector<Parameter*> parameters() override { return {&w_, &b_}; }
  std::string name() const override { return "ChannelMix"; }

 private:
  static void add(const Tensor& acc, const Tensor& v) {
    for (Index i = 0; i < acc.numel(); ++i) acc.data<double>()[i] += v.data<double>()[i];
  }
  Index cin_, cout_;
  Parameter w_, b_;
  ShardTensor x_;
};

}  // namespace tessera::test
