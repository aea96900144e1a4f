#include "runtime/nn/pad_layer.hpp"

#include <sstream>

#include "kernels/pad.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

struct Pad::Saved {
  std::unique_ptr<WindowPlan> plan;  // reused while the input layout stays the same
  kernels::PadDesc desc;
  MemSpace space = MemSpace::Host;
  DType dtype = DType::f32;
  bool have_forward = false;
};

namespace {
kernels::PadMode kernel_mode(PadOptions::Mode m) {
  switch (m) {
    case PadOptions::Mode::Reflect:
      return kernels::PadMode::Reflect;
    case PadOptions::Mode::Replicate:
      return kernels::PadMode::Replicate;
    default:
      return kernels::PadMode::Constant;
  }
}
const char* mode_name(PadOptions::Mode m) {
  switch (m) {
    case PadOptions::Mode::Reflect:
      return "reflect";
    case PadOptions::Mode::Replicate:
      return "replicate";
    default:
      return "constant";
  }
}
}  // namespace

Pad::Pad(PadOptions o) : opts_(std::move(o)) {
  const std::size_t nd = opts_.pad_lo.size();
  TESSERA_CHECK(nd >= 1 && nd <= 3, "Pad: pad_lo must give 1 to 3 spatial dims, got " << nd);
  if (opts_.pad_hi.empty()) opts_.pad_hi = opts_.pad_lo;
  TESSERA_CHECK(opts_.pad_hi.size() == nd,
                "Pad: pad_hi gives " << opts_.pad_hi.size() << " dims, pad_lo " << nd);
  for (std::size_t k = 0; k < nd; ++k)
    TESSERA_CHECK(opts_.pad_lo[k] >= 0 && opts_.pad_hi[k] >= 0,
                  "Pad: padding of spatial dim " << k << " is " << opts_.pad_lo[k] << "/"
                                                 << opts_.pad_hi[k] << ", must be >= 0");
}

Pad::~Pad() = default;

std::string Pad::name() const {
  std::ostringstream os;
  os << "Pad" << opts_.pad_lo.size() << "d(" << mode_name(opts_.mode) << ")";
  return os.str();
}

ShardSpec Pad::output_spec(const ShardSpec& in) const {
  const int nd = static_cast<int>(opts_.pad_lo.size());
  check_spatial_spec(in, nd, name());
  std::vector<Index> shape = in.global_shape();
  for (int k = 0; k < nd; ++k) {
    const Index L = shape[2 + k];
    TESSERA_CHECK(L >= 1, name() << ": spatial dim " << k << " is empty");
    TESSERA_CHECK(
        opts_.mode != PadOptions::Mode::Reflect || (opts_.pad_lo[k] < L && opts_.pad_hi[k] < L),
        name() << ": spatial dim " << k << ": reflect padding " << opts_.pad_lo[k] << "/"
               << opts_.pad_hi[k] << " must be narrower than the extent " << L
               << " (as in PyTorch)");
    shape[2 + k] = L + opts_.pad_lo[k] + opts_.pad_hi[k];
  }
  // Aligned: input cell c anchors output c + pad_lo (the padding goes to the end blocks).
  std::vector<std::function<Index(Index)>> first(in.ndim());
  for (int k = 0; k < nd; ++k)
    first[2 + k] = [plo = opts_.pad_lo[k]](Index c) { return c == 0 ? 0 : c + plo; };
  return window_output_spec(in, shape, opts_.split, first);
}

std::vector<HaloReach> Pad::reach(const ShardSpec& in) const {
  const kernels::PadMode mode = kernel_mode(opts_.mode);
  std::vector<HaloReach> r(static_cast<std::size_t>(in.ndim()), no_reach());
  for (std::size_t k = 0; k < opts_.pad_lo.size() && k + 2 < r.size(); ++k) {
    const Index plo = opts_.pad_lo[k], L = in.global_shape()[2 + k];
    r[2 + k].range = [mode, plo, L](Index lo, Index hi) {
      Index a = 0, b = 0;
      kernels::pad_input_range(mode, L, plo, lo, hi - lo, &a, &b);
      // A block of constant padding reads nothing; the halo plan wants a window in the
      // domain: the edge cell beside it (read by no output, so its gradient stays zero).
      if (b <= a) a = lo < plo ? 0 : L - 1, b = a + 1;
      return std::pair<Index, Index>{a, b};
    };
  }
  return r;
}

OpCost Pad::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  const double es = static_cast<double>(size_of(dtype));
  OpCost c = busiest(in, [&](const std::vector<int>& coords) {
    OpCost r;
    const double x = local_elems(in, coords), y = local_elems(out, coords);
    r.bytes = (2 * x + 2 * y) * es;
    return r;
  });
  c += window_halo_cost(in, out, reach(in), size_of(dtype));
  return c;
}

Pad::Saved& Pad::saved_for(const Mesh& mesh, const ShardSpec& in) {
  if (!saved_ || !saved_->plan->matches(mesh, in)) {
    auto s = std::make_unique<Saved>();
    s->plan = std::make_unique<WindowPlan>(mesh, in, output_spec(in), reach(in));
    saved_ = std::move(s);
  }
  return *saved_;
}

HaloWidths Pad::input_room(const Mesh& mesh, const ShardSpec& in) {
  return tessera::input_room(*saved_for(mesh, in).plan);
}

ShardTensor Pad::forward(const ShardTensor& x) {
  const int nd = static_cast<int>(opts_.pad_lo.size());
  check_layer_input(x, nd + 2, nd + 2, name(), true);
  Saved& s = saved_for(x.mesh(), x.spec());
  const ShardSpec& out_spec = s.plan->driver_spec;  // the plan's, not re-derived per call
  const HaloFrame xh = fill_halo(*s.plan, x);
  const BlockWindow& bw = s.plan->mine();
  const Box out_box = out_spec.local_box(x.mesh().coords());
  Tensor y = Tensor::empty(out_box.shape(), x.dtype(), x.local().space());
  kernels::PadDesc& d = s.desc;
  d = kernels::PadDesc{};
  if (!out_box.empty()) {
    const Tensor xw = xh.window(bw.window);
    d.nd = nd;
    d.type = kernel_scalar(x.dtype(), "Pad");
    d.n = out_box.extent(0);
    d.c = out_box.extent(1);
    d.mode = kernel_mode(opts_.mode);
    d.value = opts_.value;
    for (int k = 0; k < nd; ++k) {
      d.in_global[k] = x.global_shape()[2 + k];
      d.pad_lo[k] = opts_.pad_lo[k];
      d.pad_hi[k] = opts_.pad_hi[k];
      d.in_lo[k] = bw.window.lo[2 + k];
      d.in_n[k] = bw.window.extent(2 + k);
      d.out_lo[k] = out_box.lo[2 + k];
      d.out_n[k] = out_box.extent(2 + k);
    }
    for (int k = 0; k < nd + 2; ++k) d.x_strides[k] = xw.strides()[k];
    kernels::pad_forward(y.device(), d, xw.raw(), y.raw());
  }
  s.space = x.local().space();
  s.dtype = x.dtype();
  s.have_forward = true;
  return ShardTensor::unchecked(x.mesh(), out_spec, y);
}

ShardTensor Pad::backward(const ShardTensor& dy) {
  return backward_impl(dy, false);
}

ShardTensor Pad::backward_impl(const ShardTensor& dy, bool keep_room) {
  TESSERA_CHECK(saved_ && saved_->have_forward, name() << ": backward before forward");
  Saved& s = *saved_;
  check_output_grad(dy, s.plan->driver_spec, s.dtype, s.space, name());
  const HaloFrame dx = zero_frame(*s.plan, dy.dtype(), s.space);
  const BlockWindow& bw = s.plan->mine();
  if (!bw.idle) {
    const Tensor dxw = dx.window(bw.window);
    const Tensor g = dy.local().contiguous();
    kernels::pad_backward(Device::of(s.space), s.desc, g.raw(), dxw.raw());
  }
  add_ghosts_to_owners(*s.plan, dx);
  return owned_shard(*s.plan, dx, keep_room);
}

}  // namespace tessera
