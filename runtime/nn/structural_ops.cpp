// The structural ops of a graph: channel concatenation and addition (runtime/nn/op.hpp).
#include "runtime/nn/op.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

// The box of channels [c0, c1) in a local (N, C, ...) tensor of shape `shape`.
Box channel_box(const std::vector<Index>& shape, Index c0, Index c1) {
  std::vector<Index> lo(shape.size(), 0), hi = shape;
  lo[1] = c0;
  hi[1] = c1;
  return Box(lo, hi);
}

}  // namespace

ShardSpec concat_spec(const ShardSpec& a, const ShardSpec& b) {
  TESSERA_CHECK(a.ndim() >= 2 && a.ndim() == b.ndim(),
                "concat: needs two (N, C, ...) tensors of the same rank, got " << a.str() << " and "
                                                                               << b.str());
  TESSERA_CHECK(
      !a.placement(1).sharded() && !b.placement(1).sharded(),
      "concat: the channel dim must not be sharded, got " << a.str() << " and " << b.str());
  TESSERA_CHECK(a.mesh_dims() == b.mesh_dims(), "concat: inputs live on different meshes");
  TESSERA_CHECK(
      a.partial_axes() == b.partial_axes(),
      "concat: inputs are partial over different mesh axes: " << a.str() << " and " << b.str());
  std::vector<Index> shape = a.global_shape();
  std::vector<std::vector<Index>> sizes(static_cast<std::size_t>(a.ndim()));
  for (int d = 0; d < a.ndim(); ++d) {
    if (d == 1) continue;
    TESSERA_CHECK(a.global_shape()[d] == b.global_shape()[d] && a.placement(d) == b.placement(d) &&
                      a.sizes(d) == b.sizes(d),
                  "concat: inputs differ in dim " << d << " (size, placement or shard sizes): "
                                                  << a.str() << " and " << b.str());
    if (a.placement(d).sharded()) sizes[static_cast<std::size_t>(d)] = a.sizes(d);
  }
  shape[1] = a.global_shape()[1] + b.global_shape()[1];
  return ShardSpec(shape, a.placements(), a.mesh_dims(), a.partial_axes(), sizes);
}

ShardSpec ConcatOp::output_spec(const std::vector<ShardSpec>& in) const {
  return concat_spec(in.at(0), in.at(1));
}

ShardTensor ConcatOp::forward(const std::vector<ShardTensor>& in) {
  const ShardTensor& a = in.at(0);
  const ShardTensor& b = in.at(1);
  TESSERA_CHECK(a.dtype() == b.dtype() && a.local().space() == b.local().space(),
                "concat '" << node_ << "': inputs differ in dtype or memory space");
  ShardSpec spec;
  try {
    spec = concat_spec(a.spec(), b.spec());
  } catch (const Error& e) {
    throw Error("node '" + node_ + "': " + e.what());
  }
  const Mesh& mesh = a.mesh();
  const auto shape = spec.local_shape(mesh.coords());
  const Tensor local = Tensor::empty(shape, a.dtype(), a.local().space());
  const Index ca = a.global_shape()[1];
  local.view(channel_box(shape, 0, ca)).copy_from(a.local());
  local.view(channel_box(shape, ca, shape[1])).copy_from(b.local());
  split_ = ca;
  in_specs_ = {a.spec(), b.spec()};
  return ShardTensor::unchecked(mesh, spec, local);
}

std::vector<ShardTensor> ConcatOp::backward(const ShardTensor& dy) {
  const auto& shape = dy.local().shape();
  const Tensor da = dy.local().view(channel_box(shape, 0, split_)).clone();
  const Tensor db = dy.local().view(channel_box(shape, split_, shape[1])).clone();
  return {ShardTensor::unchecked(dy.mesh(), in_specs_.at(0), da),
          ShardTensor::unchecked(dy.mesh(), in_specs_.at(1), db)};
}

ShardSpec AddOp::output_spec(const std::vector<ShardSpec>& in) const {
  TESSERA_CHECK(in.at(0).global_shape() == in.at(1).global_shape(),
                "add of global shapes " << shape_str(in[0].global_shape()) << " and "
                                        << shape_str(in[1].global_shape()));
  return in[0];
}

ShardTensor AddOp::forward(const std::vector<ShardTensor>& in) {
  const ShardTensor& a = in.at(0);
  ShardTensor b = in.at(1);
  TESSERA_CHECK(a.global_shape() == b.global_shape() && a.dtype() == b.dtype(),
                "add '" << node_ << "': inputs " << a.spec().str() << " (" << name_of(a.dtype())
                        << ") and " << b.spec().str() << " (" << name_of(b.dtype())
                        << ") differ in shape or dtype");
  if (b.spec() != a.spec()) b = b.redistribute(a.spec());
  const Tensor local = a.local().clone();
  add_into(local, b.local().contiguous());
  return ShardTensor::unchecked(a.mesh(), a.spec(), local);
}

}  // namespace tessera

namespace tessera {

OpCost ConcatOp::cost(const std::vector<ShardSpec>& in, const ShardSpec& out, DType dtype) const {
  (void)in;
  return elementwise_cost(out, size_of(dtype), 0, 4);  // copy in; split the gradient
}

OpCost AddOp::cost(const std::vector<ShardSpec>& in, const ShardSpec& out, DType dtype) const {
  OpCost c = elementwise_cost(out, size_of(dtype), 1, 3);  // a, b, a + b; dy passes through
  if (in.at(1) != in.at(0)) {                              // b redistributed to a's spec
    c.max_with(busiest(out, [&](const std::vector<int>& coords) {
      OpCost r;
      r.alltoall_bytes =
          elements_sent(in[1], in[0], coords) * static_cast<std::int64_t>(size_of(dtype));
      r.alltoalls = 1;
      return r;
    }));
  }
  return c;
}

}  // namespace tessera
