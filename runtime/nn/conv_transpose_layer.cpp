#include "runtime/nn/conv_transpose_layer.hpp"

#include <algorithm>
#include <sstream>

#include "runtime/nn/conv_support.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/pad_layer.hpp"

namespace tessera {

namespace cs = conv_support;

ConvTransposeNd::ConvTransposeNd(const ConvTransposeOptions& o) : opts_(o) {
  const char* L = "ConvTransposeNd";
  cs::check_shape_options(o.nd, o.in_channels, o.out_channels, o.groups, L);
  kernel_scalar(o.dtype, L);
  const cs::WindowArgs a =
      cs::window_args(o.kernel, o.stride, o.dilation, o.padding, o.padding_hi, o.nd, L);
  out_pad_ = cs::per_dim(o.output_padding, o.nd, "output_padding", L);
  win_ = cs::window_dims(a, L, [&](int d, const WindowDim& w) {
    TESSERA_CHECK(out_pad_[d] >= 0 && out_pad_[d] < std::max(w.stride, w.dilation),
                  L << ": output_padding " << out_pad_[d] << " of dim " << d
                    << " must be smaller than the stride or the dilation");
  });
  given_win_ = win_;
  // The scatter crops no input's whole window (so no rank's window is empty): cropping as
  // wide as the window span is partly a Pad's with negative widths after it, exact as
  // cropping only moves cells (output o is the full output's o + padding either way).
  PadOptions crop;
  crop.mode = PadOptions::Mode::Constant;
  crop.split = o.split;
  bool cropped = false;
  for (std::size_t d = 0; d < win_.size(); ++d) {
    WindowDim& w = win_[d];
    const Index keep_lo = std::min(w.pad_lo, w.span() - 1);
    const Index keep_hi = std::min(w.pad_hi, out_pad_[d] + w.span() - 1);
    crop.pad_lo.push_back(keep_lo - w.pad_lo);
    crop.pad_hi.push_back(keep_hi - w.pad_hi);
    cropped = cropped || keep_lo < w.pad_lo || keep_hi < w.pad_hi;
    w.pad_lo = keep_lo;
    w.pad_hi = keep_hi;
  }
  if (cropped) crop_ = std::make_unique<Pad>(crop);
  // PyTorch's layout (C_in, C_out / groups, kernel...), whose fan_in is C_out / groups * kernel.
  cs::make_params(weight_, o.bias ? &bias_ : nullptr, o.in_channels, o.out_channels / o.groups,
                  o.out_channels, win_, o.dtype, o.space, o.seed);
}

ConvTransposeNd::~ConvTransposeNd() = default;

void ConvTransposeNd::release_saved() {
  if (crop_) crop_->release_saved();
  saved_x_ = ShardTensor();
  have_saved_ = false;
}

std::string ConvTransposeNd::name() const {
  std::ostringstream os;
  os << "ConvTranspose" << opts_.nd << "d(" << opts_.in_channels << "->" << opts_.out_channels
     << ", " << cs::windows_str(given_win_) << ", output_padding " << cs::dims_str(out_pad_)
     << ", groups " << opts_.groups << (opts_.bias ? ", bias" : "") << ")";
  return os.str();
}

ShardSpec ConvTransposeNd::output_spec(const ShardSpec& in) const {
  const ShardSpec scattered = scatter_output_spec(in);
  return crop_ ? crop_->output_spec(scattered) : scattered;
}

ShardSpec ConvTransposeNd::scatter_output_spec(const ShardSpec& in) const {
  const int nd = opts_.nd;
  const auto& shape = in.global_shape();
  cs::check_input_spec(in, nd, opts_.in_channels, name());
  std::vector<Index> out = {shape[0], opts_.out_channels};
  std::vector<std::function<Index(Index)>> first_at(2);
  for (int d = 0; d < nd; ++d) {
    const WindowDim& w = win_[d];
    TESSERA_CHECK(shape[2 + d] >= 1, name() << ": spatial dim " << d << " is empty");
    const WindowDim& given = given_win_[static_cast<std::size_t>(d)];
    const Index full = (shape[2 + d] - 1) * w.stride + w.span() + out_pad_[d];
    const Index e_given = full - given.pad_lo - given.pad_hi;
    TESSERA_CHECK(e_given >= 1, name() << ": input extent " << shape[2 + d] << " of spatial dim "
                                       << d << " gives an output extent of " << e_given
                                       << " (must be >= 1: less padding, or a larger input)");
    const Index e = full - w.pad_lo - w.pad_hi;  // >= e_given: the scatter crops less
    out.push_back(e);
    first_at.push_back([w](Index c) { return transposed_first_output_at(w, c); });
  }
  return window_output_spec(in, out, opts_.split, first_at);
}

const WindowPlan& ConvTransposeNd::plan_for(const Mesh& mesh, const ShardSpec& in) {
  if (plan_ && mesh.comm() == plan_->mesh.comm() && in == plan_->driver_spec) return *plan_;
  const ShardSpec out = scatter_output_spec(in);
  plan_.reset();
  plan_ = std::make_unique<WindowPlan>(mesh, out, in, cs::spatial_reach(win_, false));
  return *plan_;
}

OpCost ConvTransposeNd::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  (void)dtype;  // the layer's own
  const ShardSpec scattered = crop_ ? scatter_output_spec(in) : out;
  // The conv it transposes reads this layer's (uncropped) output and writes its input.
  OpCost c = cs::direct_conv_cost(scattered, in, win_, opts_.out_channels / opts_.groups,
                                  weight_.value.numel() + (opts_.bias ? bias_.value.numel() : 0),
                                  false, opts_.dtype);
  if (crop_) c += crop_->cost(scattered, out, opts_.dtype);
  return c;
}

namespace {
// The conv this layer transposes, on this rank's output window (its "x").
kernels::ConvDesc local_desc(const ConvTransposeOptions& o, const std::vector<WindowDim>& win,
                             const BlockWindow& bw) {
  return cs::local_desc(o.nd, o.dtype, o.out_channels, o.in_channels, o.groups, win, bw,
                        "ConvTransposeNd");
}

void check_local(const kernels::ConvDesc& d, const Box& in_box, const std::string& who) {
  for (int i = 0; i < d.nd; ++i)
    TESSERA_CHECK(d.out(i) == in_box.extent(2 + i), who << ": internal: local input " << d.out(i)
                                                        << " != block " << in_box.extent(2 + i)
                                                        << " in dim " << i);
}
}  // namespace

ShardTensor ConvTransposeNd::forward(const ShardTensor& x) {
  if (!crop_) return forward_scatter(x);
  return crop_->forward(forward_scatter(x));
}

ShardTensor ConvTransposeNd::backward(const ShardTensor& dy) {
  if (!crop_) return backward_scatter(dy);
  return backward_scatter(crop_->backward(dy));
}

ShardTensor ConvTransposeNd::forward_scatter(const ShardTensor& x) {
  const WindowPlan& p = plan_for(x.mesh(), x.spec());
  cs::check_input(x, opts_.dtype, opts_.space, name());
  saved_x_ = x;
  have_saved_ = true;
  const BlockWindow& bw = p.mine();
  HaloFrame g = zero_frame(p, opts_.dtype, opts_.space, bw.idle ? nullptr : &bw.window);
  if (!bw.idle) {
    kernels::ConvDesc d = local_desc(opts_, win_, bw);
    const Tensor gw = g.window(bw.window);
    cs::set_x_window(d, gw);
    check_local(d, x.local_box(), name());
    kernels::conv_backward_data(Device::of(opts_.space), d, x.local().raw(), weight_.value.raw(),
                                gw.raw());
  }
  add_ghosts_to_owners(p, g);
  ShardTensor y = owned_shard(p, g);
  if (opts_.bias)
    cs::bias_add(kernel_scalar(opts_.dtype, "ConvTransposeNd"), y.local(), bias_.value);
  return y;
}

ShardTensor ConvTransposeNd::backward_scatter(const ShardTensor& dy) {
  TESSERA_CHECK(have_saved_ && plan_, name() << ": backward without a forward");
  const WindowPlan& p = *plan_;
  cs::check_grad(dy, p.haloed_spec, opts_.dtype, opts_.space, name());
  const DType type = kernel_scalar(opts_.dtype, "ConvTransposeNd");
  const HaloFrame f = fill_halo(p, dy);
  const Box in_box = saved_x_.local_box();
  Tensor dx = Tensor::empty(in_box.shape(), opts_.dtype, opts_.space);
  Tensor dw = Tensor::zeros(weight_.value.shape(), opts_.dtype, opts_.space);
  const BlockWindow& bw = p.mine();
  if (!bw.idle) {
    kernels::ConvDesc d = local_desc(opts_, win_, bw);
    const Tensor fw = f.window(bw.window);
    cs::set_x_window(d, fw);
    check_local(d, in_box, name());
    kernels::conv_forward(Device::of(opts_.space), d, fw.raw(), weight_.value.raw(), nullptr,
                          dx.raw());
    kernels::conv_backward_weights(Device::of(opts_.space), d, fw.raw(), saved_x_.local().raw(),
                                   dw.raw(), nullptr);
  }
  cs::accumulate_grad(weight_, dw, p.driver_spec);
  if (opts_.bias) {
    Tensor db = Tensor::zeros({opts_.out_channels}, opts_.dtype, opts_.space);
    cs::bias_grad(type, dy.local(), db);
    cs::accumulate_grad(bias_, db, p.driver_spec);
  }
  saved_x_ = ShardTensor();
  have_saved_ = false;
  return ShardTensor::unchecked(p.mesh, p.driver_spec, dx);
}

std::vector<Parameter*> ConvTransposeNd::parameters() {
  if (opts_.bias) return {&weight_, &bias_};
  return {&weight_};
}

}  // namespace tessera
