#include "runtime/nn/upsample_layer.hpp"

#include <sstream>

#include "kernels/upsample.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

struct Upsample::Saved {
  std::unique_ptr<WindowPlan> plan;  // reused while the input layout stays the same
  kernels::UpsampleDesc desc;
  MemSpace space = MemSpace::Host;
  DType dtype = DType::f32;
  bool have_forward = false;
};

Upsample::Upsample(UpsampleOptions o) : opts_(std::move(o)) {
  const std::size_t nd = opts_.scale.size();
  TESSERA_CHECK(nd >= 1 && nd <= 3, "Upsample: scale must give 1 to 3 spatial dims, got " << nd);
  for (std::size_t k = 0; k < nd; ++k)
    TESSERA_CHECK(opts_.scale[k] >= 1, "Upsample: scale of spatial dim "
                                           << k << " is " << opts_.scale[k] << ", must be >= 1");
  TESSERA_CHECK(!opts_.align_corners || opts_.mode == UpsampleOptions::Mode::Linear,
                "Upsample: align_corners applies to linear upsampling only (nearest has no "
                "corners to align, as in PyTorch)");
}

Upsample::~Upsample() = default;

std::string Upsample::name() const {
  std::ostringstream os;
  os << "Upsample" << opts_.scale.size() << "d("
     << (opts_.mode == UpsampleOptions::Mode::Nearest ? "nearest" : "linear")
     << (opts_.align_corners ? ", align_corners" : "") << ")";
  return os.str();
}

ShardSpec Upsample::output_spec(const ShardSpec& in) const {
  const int nd = static_cast<int>(opts_.scale.size());
  check_spatial_spec(in, nd, name());
  std::vector<Index> shape = in.global_shape();
  for (int k = 0; k < nd; ++k) {
    TESSERA_CHECK(shape[2 + k] >= 1, name() << ": spatial dim " << k << " is empty");
    shape[2 + k] *= opts_.scale[k];
  }
  // Aligned: input cell c anchors outputs [c * scale, (c + 1) * scale).
  std::vector<std::function<Index(Index)>> first(in.ndim());
  for (int k = 0; k < nd; ++k) first[2 + k] = [s = opts_.scale[k]](Index c) { return c * s; };
  return window_output_spec(in, shape, opts_.split, first);
}

namespace {
kernels::UpsampleMode kernel_mode(const UpsampleOptions& o) {
  if (o.mode == UpsampleOptions::Mode::Nearest) return kernels::UpsampleMode::Nearest;
  return o.align_corners ? kernels::UpsampleMode::LinearAlignCorners
                         : kernels::UpsampleMode::Linear;
}
}  // namespace

std::vector<HaloReach> Upsample::reach(const ShardSpec& in) const {
  const kernels::UpsampleMode mode = kernel_mode(opts_);
  std::vector<HaloReach> r(static_cast<std::size_t>(in.ndim()), no_reach());
  for (std::size_t k = 0; k < opts_.scale.size() && k + 2 < r.size(); ++k) {
    const Index scale = opts_.scale[k], L = in.global_shape()[2 + k];
    r[2 + k].range = [mode, scale, L](Index lo, Index hi) {
      Index a = 0, b = 0;
      kernels::upsample_input_range(mode, scale, L, lo, hi - lo, &a, &b);
      return std::pair<Index, Index>{a, b};
    };
  }
  return r;
}

OpCost Upsample::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  const double es = static_cast<double>(size_of(dtype));
  OpCost c = busiest(in, [&](const std::vector<int>& coords) {
    OpCost r;
    const double x = local_elems(in, coords), y = local_elems(out, coords);
    r.flops = y;
    r.bytes = (2 * x + 2 * y) * es;
    return r;
  });
  c += window_halo_cost(in, out, reach(in), size_of(dtype));
  return c;
}

Upsample::Saved& Upsample::saved_for(const Mesh& mesh, const ShardSpec& in) {
  if (!saved_ || !saved_->plan->matches(mesh, in)) {
    auto s = std::make_unique<Saved>();
    s->plan = std::make_unique<WindowPlan>(mesh, in, output_spec(in), reach(in));
    saved_ = std::move(s);
  }
  return *saved_;
}

HaloWidths Upsample::input_room(const Mesh& mesh, const ShardSpec& in) {
  return tessera::input_room(*saved_for(mesh, in).plan);
}

ShardTensor Upsample::forward(const ShardTensor& x) {
  const int nd = static_cast<int>(opts_.scale.size());
  check_layer_input(x, nd + 2, nd + 2, name(), true);
  const kernels::UpsampleMode mode = kernel_mode(opts_);
  Saved& s = saved_for(x.mesh(), x.spec());
  const ShardSpec& out_spec = s.plan->driver_spec;  // the plan's, not re-derived per call
  const HaloFrame xh = fill_halo(*s.plan, x);
  const BlockWindow& bw = s.plan->mine();
  const Box out_box = out_spec.local_box(x.mesh().coords());
  Tensor y = Tensor::empty(out_box.shape(), x.dtype(), x.local().space());
  kernels::UpsampleDesc& d = s.desc;
  d = kernels::UpsampleDesc{};
  if (!bw.idle) {
    const Tensor xw = xh.window(bw.window);
    d.nd = nd;
    d.type = kernel_scalar(x.dtype(), "Upsample");
    d.n = xw.shape(0);
    d.c = xw.shape(1);
    d.mode = mode;
    for (int k = 0; k < nd; ++k) {
      d.scale[k] = opts_.scale[k];
      d.in_global[k] = x.global_shape()[2 + k];
      d.in_lo[k] = bw.window.lo[2 + k];
      d.in_n[k] = bw.window.extent(2 + k);
      d.out_lo[k] = out_box.lo[2 + k];
      d.out_n[k] = out_box.extent(2 + k);
    }
    for (int k = 0; k < nd + 2; ++k) d.x_strides[k] = xw.strides()[k];
    kernels::upsample_forward(xw.device(), d, xw.raw(), y.raw());
  }
  s.space = x.local().space();
  s.dtype = x.dtype();
  s.have_forward = true;
  return ShardTensor::unchecked(x.mesh(), out_spec, y);
}

ShardTensor Upsample::backward(const ShardTensor& dy) {
  return backward_impl(dy, false);
}

ShardTensor Upsample::backward_impl(const ShardTensor& dy, bool keep_room) {
  TESSERA_CHECK(saved_ && saved_->have_forward, name() << ": backward before forward");
  Saved& s = *saved_;
  check_output_grad(dy, s.plan->driver_spec, s.dtype, s.space, name());
  const HaloFrame dx = zero_frame(*s.plan, dy.dtype(), s.space);
  const BlockWindow& bw = s.plan->mine();
  if (!bw.idle) {
    const Tensor dxw = dx.window(bw.window);
    const Tensor g = dy.local().contiguous();
    kernels::upsample_backward(Device::of(s.space), s.desc, g.raw(), dxw.raw());
  }
  add_ghosts_to_owners(*s.plan, dx);
  return owned_shard(*s.plan, dx, keep_room);
}

}  // namespace tessera
