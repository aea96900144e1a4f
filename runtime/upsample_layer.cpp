#include "runtime/upsample_layer.hpp"

#include <sstream>

#include "kernels/upsample.hpp"
#include "runtime/error.hpp"
#include "runtime/halo_exchange.hpp"
#include "runtime/ops_support.hpp"
#include "runtime/window_plan.hpp"

namespace tessera {

struct Upsample::Saved {
  ShardSpec in_spec, out_spec;
  std::unique_ptr<HaloExchange> exchange;  // reused while the input spec stays the same
  WindowPlan plan;
  kernels::UpsampleDesc desc;
  MemSpace space = MemSpace::Host;
  bool have_forward = false;
};

Upsample::Upsample(UpsampleOptions o) : opts_(std::move(o)) {
  const std::size_t nd = opts_.scale.size();
  TESSERA_CHECK(nd >= 1 && nd <= 3, "Upsample: scale must give 1 to 3 spatial dims, got " << nd);
  for (std::size_t k = 0; k < nd; ++k)
    TESSERA_CHECK(opts_.scale[k] >= 1, "Upsample: scale of spatial dim "
                                           << k << " is " << opts_.scale[k] << ", must be >= 1");
}

Upsample::~Upsample() = default;

std::string Upsample::name() const {
  std::ostringstream os;
  os << "Upsample" << opts_.scale.size() << "d("
     << (opts_.mode == UpsampleOptions::Mode::Nearest ? "nearest" : "linear") << ")";
  return os.str();
}

ShardSpec Upsample::output_spec(const ShardSpec& in) const {
  const int nd = static_cast<int>(opts_.scale.size());
  TESSERA_CHECK(in.ndim() == nd + 2, name() << ": input of rank " << in.ndim() << ", expected "
                                            << nd + 2 << " (N, C, spatial...)");
  TESSERA_CHECK(!in.has_partial(), name() << ": input has Partial axes (" << in.str() << ")");
  std::vector<Index> shape = in.global_shape();
  for (int k = 0; k < nd; ++k) {
    TESSERA_CHECK(shape[2 + k] >= 1, name() << ": spatial dim " << k << " is empty");
    shape[2 + k] *= opts_.scale[k];
  }
  return balanced_output_spec(in, shape);
}

namespace {
kernels::UpsampleMode kernel_mode(UpsampleOptions::Mode m) {
  return m == UpsampleOptions::Mode::Nearest ? kernels::UpsampleMode::Nearest
                                             : kernels::UpsampleMode::Linear;
}
}  // namespace

ShardTensor Upsample::forward(const ShardTensor& x) {
  const int nd = static_cast<int>(opts_.scale.size());
  check_layer_input(x, nd + 2, nd + 2, name());
  const ShardSpec out_spec = output_spec(x.spec());
  const kernels::UpsampleMode mode = kernel_mode(opts_.mode);
  if (!saved_ || saved_->in_spec != x.spec()) {
    auto s = std::make_unique<Saved>();
    s->in_spec = x.spec();
    s->out_spec = out_spec;
    const std::vector<Index> in_shape = x.global_shape();
    s->plan = make_window_plan(x.mesh(), x.spec(), out_spec, [&](int d, Index lo, Index hi) {
      if (d < 2) return std::pair<Index, Index>{lo, hi};
      Index a = 0, b = 0;
      kernels::upsample_input_range(mode, opts_.scale[d - 2], in_shape[d], lo, hi - lo, &a, &b);
      return std::pair<Index, Index>{a, b};
    });
    s->exchange = std::make_unique<HaloExchange>(x.mesh(), x.spec(), s->plan.widths);
    saved_ = std::move(s);
  }
  Saved& s = *saved_;
  HaloTensor xh = HaloTensor::from_shard(x, s.plan.widths);
  s.exchange->exchange(xh);

  const Box out_box = out_spec.local_box(x.mesh().coords());
  Tensor y = Tensor::empty(out_box.shape(), x.dtype(), x.local().space());
  kernels::UpsampleDesc& d = s.desc;
  d = kernels::UpsampleDesc{};
  if (s.plan.active) {
    const Tensor xw = xh.view_global(s.plan.window);
    d.nd = nd;
    d.type = kernel_scalar(x.dtype(), "Upsample");
    d.n = xw.shape(0);
    d.c = xw.shape(1);
    d.mode = mode;
    for (int k = 0; k < nd; ++k) {
      d.scale[k] = opts_.scale[k];
      d.in_global[k] = x.global_shape()[2 + k];
      d.in_lo[k] = s.plan.window.lo[2 + k];
      d.in_n[k] = s.plan.window.extent(2 + k);
      d.out_lo[k] = out_box.lo[2 + k];
      d.out_n[k] = out_box.extent(2 + k);
    }
    for (int k = 0; k < nd + 2; ++k) d.x_strides[k] = xw.strides()[k];
    if (xw.space() == MemSpace::Host)
      kernels::upsample_forward_cpu(d, xw.raw(), y.raw());
    else
      kernels::upsample_forward_cuda(d, xw.raw(), y.raw());
  }
  s.space = x.local().space();
  s.have_forward = true;
  return ShardTensor::unchecked(x.mesh(), out_spec, y);
}

ShardTensor Upsample::backward(const ShardTensor& dy) {
  TESSERA_CHECK(saved_ && saved_->have_forward, name() << ": backward before forward");
  Saved& s = *saved_;
  TESSERA_CHECK(dy.spec() == s.out_spec, name()
                                             << ": output gradient laid out as " << dy.spec().str()
                                             << ", forward produced " << s.out_spec.str());
  kernel_scalar(dy.dtype(), "Upsample");
  HaloTensor dx(dy.mesh(), s.in_spec, s.plan.widths, dy.dtype(), s.space);
  if (s.plan.active) {
    TESSERA_CHECK(kernel_scalar(dy.dtype(), "Upsample") == s.desc.type,
                  name() << ": output gradient is " << name_of(dy.dtype())
                         << ", forward ran on another element type");
    const Tensor dxw = dx.view_global(s.plan.window);
    const Tensor g = dy.local().contiguous();
    if (s.space == MemSpace::Host)
      kernels::upsample_backward_cpu(s.desc, g.raw(), dxw.raw());
    else
      kernels::upsample_backward_cuda(s.desc, g.raw(), dxw.raw());
  }
  s.exchange->exchange_adjoint(dx);
  return dx.to_shard();
}

}  // namespace tessera
