#include "runtime/nn/window_layout.hpp"

#include "runtime/comm/mpi_error.hpp"
#include "runtime/tensor/mesh.hpp"

namespace tessera {

ShardSpec window_output_spec(const ShardSpec& in, const std::vector<Index>& out_shape,
                             OutputSplit split,
                             const std::vector<std::function<Index(Index)>>& first_output_at) {
  const int nd = in.ndim();
  TESSERA_CHECK(
      static_cast<int>(out_shape.size()) == nd && static_cast<int>(first_output_at.size()) == nd,
      "window_output_spec: input has " << nd << " dims, output shape " << shape_str(out_shape));
  std::vector<std::vector<Index>> sizes(nd);
  for (int d = 0; d < nd; ++d) {
    if (!in.placement(d).sharded()) continue;
    if (!first_output_at[d]) {
      TESSERA_CHECK(out_shape[d] == in.global_shape()[d],
                    "window_output_spec: dim " << d << " has no window but changes extent");
      sizes[d] = in.sizes(d);
    } else {
      sizes[d] = split_output(in.partition(), d, out_shape[d], split, first_output_at[d]);
    }
  }
  return ShardSpec(out_shape, in.placements(), in.mesh_dims(), in.partial_axes(), sizes);
}

std::vector<int> sharding_axes(const ShardSpec& spec) {
  std::vector<int> axes;
  for (int d = 0; d < spec.ndim(); ++d)
    if (spec.placement(d).sharded()) axes.push_back(spec.placement(d).axis);
  return axes;
}

WindowPlan::WindowPlan(const Mesh& m, const ShardSpec& haloed, const ShardSpec& driver,
                       const std::vector<HaloReach>& reach)
    : mesh(m),
      haloed_spec(haloed),
      driver_spec(driver),
      geometry(haloed.partition(), driver.partition(), reach),
      block(block_of(m, haloed)) {
  if (geometry.any_ghosts()) {
    HaloOptions o;
    o.periodic = geometry.periodic();
    exchange = std::make_unique<HaloExchange>(mesh, haloed_spec, geometry.widths(), o);
  }
}

Tensor HaloFrame::window(const Box& g) const {
  return buffer.view(relative_to(g, box));
}

HaloFrame fill_halo(const WindowPlan& plan, const ShardTensor& t) {
  HaloFrame f;
  if (!plan.exchange) {
    // As zero_frame's buffer: a shard given with room (a strided view) is copied, so that a
    // backward may take the forward's strides for the gradient's frame.
    f.buffer = t.local().contiguous();
    f.box = t.local_box();
    return f;
  }
  f.halo = HaloTensor::over(t, plan.geometry.widths());
  plan.exchange->exchange(f.halo);
  f.buffer = f.halo.padded();
  f.box = f.halo.padded_box();
  return f;
}

HaloWidths input_room(const WindowPlan& plan) {
  return plan.exchange ? plan.geometry.widths() : HaloWidths();
}

HaloFrame zero_frame(const WindowPlan& plan, DType dtype, MemSpace space, const Box* written) {
  HaloFrame f;
  if (!plan.exchange) {
    f.box = plan.haloed_spec.local_box(plan.mesh.coords());
    const bool covered = written && written->contains(f.box);
    f.buffer = covered ? Tensor::empty(f.box.shape(), dtype, space)
                       : Tensor::zeros(f.box.shape(), dtype, space);
    return f;
  }
  f.halo = written ? HaloTensor::for_overwrite(plan.mesh, plan.haloed_spec, plan.geometry.widths(),
                                               dtype, space, *written)
                   : HaloTensor(plan.mesh, plan.haloed_spec, plan.geometry.widths(), dtype, space);
  f.buffer = f.halo.padded();
  f.box = f.halo.padded_box();
  return f;
}

void add_ghosts_to_owners(const WindowPlan& plan, const HaloFrame& f) {
  if (plan.exchange) plan.exchange->exchange_adjoint(f.halo);
}

ShardTensor owned_shard(const WindowPlan& plan, const HaloFrame& f, bool keep_room) {
  if (plan.exchange) return keep_room ? f.halo.as_shard() : f.halo.to_shard();
  return ShardTensor::unchecked(plan.mesh, plan.haloed_spec, f.buffer);
}

}  // namespace tessera
