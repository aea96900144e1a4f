#include "runtime/nn/window_copy_layer.hpp"

#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

WindowCopyLayer::WindowCopyLayer(int nd) : nd_(nd) {}

WindowCopyLayer::~WindowCopyLayer() = default;

WindowPlan& WindowCopyLayer::plan_for(const Mesh& mesh, const ShardSpec& in) {
  if (!plan_ || !plan_->matches(mesh, in)) {
    plan_ = std::make_unique<WindowPlan>(mesh, in, output_spec(in), reach(in));
    have_forward_ = worked_ = false;  // a forward of another layout has no backward here
  }
  return *plan_;
}

HaloWidths WindowCopyLayer::input_room(const Mesh& mesh, const ShardSpec& in) {
  return tessera::input_room(plan_for(mesh, in));
}

OpCost WindowCopyLayer::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  const double es = static_cast<double>(size_of(dtype));
  OpCost c = busiest(in, [&](const std::vector<int>& coords) {
    OpCost r;
    const double x = local_elems(in, coords), y = local_elems(out, coords);
    r.flops = flops_per_output() * y;
    r.bytes = (2 * x + 2 * y) * es;
    return r;
  });
  c += window_halo_cost(in, out, reach(in), size_of(dtype));
  return c;
}

ShardTensor WindowCopyLayer::forward(const ShardTensor& x) {
  check_layer_input(x, nd_ + 2, nd_ + 2, name(), true);
  const WindowPlan& p = plan_for(x.mesh(), x.spec());
  const ShardSpec& out_spec = p.driver_spec;  // the plan's, not re-derived per call
  const HaloFrame xh = fill_halo(p, x);
  const BlockWindow& bw = p.mine();
  const Box out_box = out_spec.local_box(x.mesh().coords());
  Tensor y = Tensor::empty(out_box.shape(), x.dtype(), x.local().space());
  worked_ = !bw.idle;
  if (worked_)
    forward_window(Window{bw.window, out_box, x.global_shape()}, xh.window(bw.window), y);
  space_ = x.local().space();
  dtype_ = x.dtype();
  have_forward_ = true;
  return ShardTensor::unchecked(x.mesh(), out_spec, y);
}

ShardTensor WindowCopyLayer::backward(const ShardTensor& dy) {
  return backward_impl(dy, false);
}

ShardTensor WindowCopyLayer::backward_impl(const ShardTensor& dy, bool keep_room) {
  TESSERA_CHECK(plan_ && have_forward_, name() << ": backward before forward");
  const WindowPlan& p = *plan_;
  check_output_grad(dy, p.driver_spec, dtype_, space_, name());
  const HaloFrame dx = zero_frame(p, dy.dtype(), space_);
  if (worked_) backward_window(dy.local().contiguous(), dx.window(p.mine().window));
  add_ghosts_to_owners(p, dx);
  return owned_shard(p, dx, keep_room);
}

}  // namespace tessera
