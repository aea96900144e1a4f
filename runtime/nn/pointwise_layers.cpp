#include "runtime/nn/pointwise_layers.hpp"

#include "kernels/bias.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"
#include "runtime/tensor/halo_tensor.hpp"

namespace tessera {

ShardSpec ActivationLayer::output_spec(const ShardSpec& in) const {
  TESSERA_CHECK(!in.has_partial(), name() << ": input has Partial axes (" << in.str()
                                          << "); a nonlinearity needs the summed value");
  return in;
}

void ActivationLayer::release_saved() {
  x_ = ShardTensor();
}

std::string ActivationLayer::name() const {
  return kernels::name_of(kind_);
}

ShardTensor ActivationLayer::forward(const ShardTensor& x) {
  return forward_into_room(x, HaloWidths());
}

ShardTensor ActivationLayer::forward_into_room(const ShardTensor& x, const HaloWidths& room) {
  check_layer_input(x, 1, kMaxDims, name());
  const DType t = kernel_scalar(x.dtype(), "ActivationLayer");
  const Tensor& in = x.local();
  const ShardTensor y =
      room.empty() ? ShardTensor::unchecked(x.mesh(), x.spec(),
                                            Tensor::empty(in.shape(), in.dtype(), in.space()))
                   : ShardTensor::with_room(x.mesh(), x.spec(), room, in.dtype(), in.space());
  const Tensor& out = y.local();
  if (out.is_contiguous())
    kernels::activation_forward(in.device(), kind_, t, in.numel(), in.raw(), out.raw());
  else  // the interior of the consumer's ghost room
    kernels::activation_forward(in.device(), kind_, t, element_map(out, in), in.raw(), out.raw());
  x_ = x;
  return y;
}

ShardTensor ActivationLayer::backward(const ShardTensor& dy) {
  TESSERA_CHECK(x_.local().defined(), name() << ": backward before forward");
  TESSERA_CHECK(dy.spec() == x_.spec(), name()
                                            << ": output gradient laid out as " << dy.spec().str()
                                            << ", forward produced " << x_.spec().str());
  TESSERA_CHECK(dy.dtype() == x_.dtype(), name() << ": output gradient is " << name_of(dy.dtype())
                                                 << ", input was " << name_of(x_.dtype()));
  const DType t = kernel_scalar(dy.dtype(), "ActivationLayer");
  const Tensor& in = x_.local();
  const Tensor& g = dy.local();
  Tensor dx = Tensor::empty(in.shape(), in.dtype(), in.space());
  if (g.is_contiguous())
    kernels::activation_backward(in.device(), kind_, t, in.numel(), in.raw(), g.raw(), dx.raw());
  else  // a gradient in ghost room: read in place
    kernels::activation_backward(in.device(), kind_, t, element_map(g, in), in.raw(), g.raw(),
                                 dx.raw());
  release_saved();  // served
  return ShardTensor::unchecked(dy.mesh(), dy.spec(), dx);
}

ChannelBias::ChannelBias(Index channels, DType dtype, MemSpace space) {
  TESSERA_CHECK(channels >= 1, "ChannelBias: channels = " << channels << ", must be >= 1");
  kernel_scalar(dtype, "ChannelBias");
  bias_ = make_param("bias", {channels}, 0.0, dtype, space);
}

ShardSpec ChannelBias::output_spec(const ShardSpec& in) const {
  TESSERA_CHECK(!in.has_partial(), name() << ": input has Partial axes (" << in.str()
                                          << "); redistribute first (the bias would be added once"
                                             " per addend)");
  TESSERA_CHECK(in.ndim() >= 2,
                name() << ": input of rank " << in.ndim() << ", expected (N, C, spatial...)");
  TESSERA_CHECK(in.global_shape()[1] == bias_.value.numel(),
                name() << ": input has " << in.global_shape()[1] << " channels, the bias "
                       << bias_.value.numel());
  return in;
}

namespace {
// (n, c, inner) extents of a local (N, C, spatial...) shard.
void ncs(const Tensor& t, Index& n, Index& c, Index& inner) {
  n = t.shape(0);
  c = t.shape(1);
  inner = 1;
  for (int d = 2; d < t.ndim(); ++d) inner *= t.shape(d);
}
}  // namespace

ShardTensor ChannelBias::forward(const ShardTensor& x) {
  check_layer_input(x, 2, kMaxDims, name());
  output_spec(x.spec());
  TESSERA_CHECK(x.dtype() == bias_.value.dtype() && x.local().space() == bias_.value.space(),
                name() << ": input is " << name_of(x.dtype()) << " in "
                       << name_of(x.local().space()) << " memory, the bias "
                       << name_of(bias_.value.dtype()) << " in " << name_of(bias_.value.space()));
  const DType t = kernel_scalar(x.dtype(), "ChannelBias");
  Tensor y = x.local().clone();
  Index n, c, inner;
  ncs(y, n, c, inner);
  const Index c0 = x.local_box().lo[1];
  const Tensor b = bias_.value.view(Box({c0}, {c0 + c}));
  if (y.numel() > 0) {
    kernels::bias_add(y.device(), t, n, c, inner, y.raw(), b.raw());
  }
  spec_ = x.spec();
  return ShardTensor::unchecked(x.mesh(), x.spec(), y);
}

ShardTensor ChannelBias::backward(const ShardTensor& dy) {
  TESSERA_CHECK(spec_.ndim() > 0, name() << ": backward before forward");
  TESSERA_CHECK(dy.spec() == spec_, name() << ": output gradient laid out as " << dy.spec().str()
                                           << ", forward produced " << spec_.str());
  TESSERA_CHECK(dy.dtype() == bias_.value.dtype(), name() << ": output gradient is "
                                                          << name_of(dy.dtype()) << ", the bias "
                                                          << name_of(bias_.value.dtype()));
  const DType t = kernel_scalar(dy.dtype(), "ChannelBias");
  const Tensor& g = dy.local();
  Index n, c, inner;
  ncs(g, n, c, inner);
  const Index c0 = dy.local_box().lo[1];
  Tensor db = Tensor::zeros({c}, g.dtype(), g.space());
  if (c > 0 && n * inner > 0) {
    kernels::bias_backward(g.device(), t, n, c, inner, g.raw(), db.raw());
  }
  add_param_grad(sharding_axes(dy.spec()), db, c0, bias_);
  return dy;  // d(x + b)/dx is the identity
}

}  // namespace tessera
