#include "runtime/nn/conv_layer.hpp"

#include <algorithm>
#include <sstream>

#include "runtime/nn/conv_support.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/pad_layer.hpp"

namespace tessera {

namespace cs = conv_support;

std::string name_of(PaddingMode m) {
  switch (m) {
    case PaddingMode::Circular:
      return "circular";
    case PaddingMode::Reflect:
      return "reflect";
    case PaddingMode::Replicate:
      return "replicate";
    default:
      return "zeros";
  }
}

ConvNd::ConvNd(const ConvOptions& o) : opts_(o) {
  const char* L = "ConvNd";
  cs::check_shape_options(o.nd, o.in_channels, o.out_channels, o.groups, L);
  kernel_scalar(o.dtype, L);
  const cs::WindowArgs a =
      cs::window_args(o.kernel, o.stride, o.dilation, o.padding, o.padding_hi, o.nd, L);
  win_ = cs::window_dims(a, L, [](int, const WindowDim&) {});
  bool any_padding = false, wide_zeros = false;
  for (const WindowDim& w : win_) {
    any_padding = any_padding || w.pad_lo > 0 || w.pad_hi > 0;
    // Zero padding as wide as the window span: some windows would lie wholly in padding
    // (outputs equal to the bias, as PyTorch gives), and the local kernels clip padding to
    // the rank's own window, so such padding is a Pad's, with the convolution unpadded.
    wide_zeros = wide_zeros || (o.padding_mode == PaddingMode::Zeros &&
                                (w.pad_lo >= w.span() || w.pad_hi >= w.span()));
  }
  if (wide_zeros || (any_padding && (o.padding_mode == PaddingMode::Reflect ||
                                     o.padding_mode == PaddingMode::Replicate))) {
    // PyTorch pads first (F.pad), then convolves without padding: so does the layer.
    PadOptions p;
    p.mode = o.padding_mode == PaddingMode::Reflect     ? PadOptions::Mode::Reflect
             : o.padding_mode == PaddingMode::Replicate ? PadOptions::Mode::Replicate
                                                        : PadOptions::Mode::Constant;
    p.split = o.split;
    for (WindowDim& w : win_) {
      p.pad_lo.push_back(w.pad_lo);
      p.pad_hi.push_back(w.pad_hi);
      w.pad_lo = w.pad_hi = 0;
    }
    pad_ = std::make_unique<Pad>(p);
  }
  cs::make_params(weight_, o.bias ? &bias_ : nullptr, o.out_channels, o.in_channels / o.groups,
                  o.out_channels, win_, o.dtype, o.space, o.seed);
}

ConvNd::~ConvNd() = default;

std::vector<WindowDim> ConvNd::given_windows() const {
  std::vector<WindowDim> w = win_;
  for (std::size_t d = 0; pad_ && d < w.size(); ++d) {
    w[d].pad_lo = pad_->options().pad_lo[d];
    w[d].pad_hi = pad_->options().pad_hi[d];
  }
  return w;
}

void ConvNd::release_saved() {
  if (pad_) pad_->release_saved();
  saved_x_ = HaloFrame();
  have_saved_ = false;
}

std::string ConvNd::name() const {
  std::ostringstream os;
  os << "Conv" << opts_.nd << "d(" << opts_.in_channels << "->" << opts_.out_channels << ", "
     << cs::windows_str(given_windows()) << " " << name_of(opts_.padding_mode) << ", groups "
     << opts_.groups << (opts_.bias ? ", bias" : "") << ")";
  return os.str();
}

ShardSpec ConvNd::output_spec(const ShardSpec& in) const {
  if (!pad_) return conv_output_spec(in);
  cs::check_input_spec(in, opts_.nd, opts_.in_channels, name());
  return conv_output_spec(pad_->output_spec(in));
}

ShardSpec ConvNd::conv_output_spec(const ShardSpec& in) const {
  const int nd = opts_.nd;
  const auto& shape = in.global_shape();
  cs::check_input_spec(in, nd, opts_.in_channels, name());
  std::vector<Index> out = {shape[0], opts_.out_channels};
  std::vector<std::function<Index(Index)>> first_at(2);
  for (int d = 0; d < nd; ++d) {
    const WindowDim& w = win_[d];
    const Index e = w.out_extent(shape[2 + d]);
    TESSERA_CHECK(e >= 1, name() << ": spatial dim " << d << " of extent " << shape[2 + d]
                                 << " is smaller than the window span " << w.span()
                                 << " with padding " << w.pad_lo << "," << w.pad_hi);
    out.push_back(e);
    first_at.push_back([w](Index c) { return conv_first_output_at(w, c); });
  }
  return window_output_spec(in, out, opts_.split, first_at);
}

const WindowPlan& ConvNd::plan_for(const Mesh& mesh, const ShardSpec& in) {
  if (plan_ && plan_->matches(mesh, in)) return *plan_;
  const ShardSpec out = conv_output_spec(in);  // in: the padded input where a Pad runs first
  plan_.reset();
  plan_ = std::make_unique<WindowPlan>(
      mesh, in, out, cs::spatial_reach(win_, opts_.padding_mode == PaddingMode::Circular));
  return *plan_;
}

namespace {
// The local conv of this rank's block, before the window's sizes and strides are set.
kernels::ConvDesc local_desc(const ConvOptions& o, const std::vector<WindowDim>& win,
                             const BlockWindow& bw) {
  return cs::local_desc(o.nd, o.dtype, o.in_channels, o.out_channels, o.groups, win, bw, "ConvNd");
}
}  // namespace

ShardTensor ConvNd::forward(const ShardTensor& x) {
  if (!pad_) return forward_conv(x);
  cs::check_input(x, opts_.dtype, opts_.space, name());
  return forward_conv(pad_->forward(x));
}

ShardTensor ConvNd::forward_conv(const ShardTensor& x) {
  const WindowPlan& p = plan_for(x.mesh(), x.spec());
  cs::check_input(x, opts_.dtype, opts_.space, name());
  const Box out_box = p.driver_spec.local_box(p.mesh.coords());
  Tensor y = Tensor::empty(out_box.shape(), opts_.dtype, opts_.space);
  have_saved_ = true;
  if (opts_.overlap && p.exchange) {
    forward_overlapped(p, x, y);
    return ShardTensor::unchecked(p.mesh, p.driver_spec, y);
  }
  saved_x_ = fill_halo(p, x);
  const BlockWindow& bw = p.mine();
  if (!bw.idle) {
    kernels::ConvDesc d = local_desc(opts_, win_, bw);
    const Tensor xw = saved_x_.window(bw.window);
    cs::set_x_window(d, xw);
    for (int i = 0; i < opts_.nd; ++i)
      TESSERA_CHECK(d.out(i) == out_box.extent(2 + i),
                    name() << ": internal: local output " << d.out(i) << " != block "
                           << out_box.extent(2 + i) << " in dim " << i);
    kernels::conv_forward(Device::of(opts_.space), d, xw.raw(), weight_.value.raw(),
                          opts_.bias ? bias_.value.raw() : nullptr, y.raw());
  }
  return ShardTensor::unchecked(p.mesh, p.driver_spec, y);
}

namespace {
// Per spatial dim, the outputs of `out` whose windows (clipped to the domain along open
// dims) stay inside `owned`: an interval, as window starts grow with the output index.
Box interior_outputs(const Box& out, const Box& owned, const Box& domain,
                     const std::vector<WindowDim>& win, bool periodic) {
  Box in = out;
  for (std::size_t i = 0; i < win.size(); ++i) {
    const int d = static_cast<int>(i) + 2;
    Index first = out.hi[d], last = out.hi[d];
    for (Index o = out.lo[d]; o < out.hi[d]; ++o) {
      auto [lo, hi] = win[i].input_range(o, o + 1);
      if (!periodic) lo = std::max(lo, domain.lo[d]), hi = std::min(hi, domain.hi[d]);
      const bool inside = lo >= owned.lo[d] && hi <= owned.hi[d];
      if (inside && first == out.hi[d]) first = o;
      if (inside) last = o + 1;
    }
    in.lo[d] = first;
    in.hi[d] = first == out.hi[d] ? first : last;
  }
  return in;
}

// out minus interior as disjoint slabs, peeled dim by dim (faces, then edges and corners
// go with the earlier dims' slabs).
std::vector<Box> boundary_slabs(const Box& out, const Box& interior) {
  std::vector<Box> slabs;
  if (interior.empty()) return {out};
  Box rem = out;
  for (int d = 2; d < out.ndim; ++d) {
    Box lo = rem, hi = rem;
    lo.hi[d] = interior.lo[d];
    hi.lo[d] = interior.hi[d];
    if (!lo.empty()) slabs.push_back(lo);
    if (!hi.empty()) slabs.push_back(hi);
    rem.lo[d] = interior.lo[d];
    rem.hi[d] = interior.hi[d];
  }
  return slabs;
}
}  // namespace

void ConvNd::forward_piece(const WindowPlan& p, const Box& piece, const Tensor& y) {
  if (piece.empty()) return;
  const bool periodic = opts_.padding_mode == PaddingMode::Circular;
  const Box& domain = p.haloed_spec.partition().domain();
  const BlockWindow& bw = p.mine();
  Box read = bw.window;  // batch and channel dims: as the block's
  kernels::ConvDesc d = local_desc(opts_, win_, bw);
  for (int i = 0; i < opts_.nd; ++i) {
    const int k = i + 2;
    const auto [first, last] = win_[i].input_range(piece.lo[k], piece.hi[k]);
    read.lo[k] = periodic ? first : std::max(first, domain.lo[k]);
    read.hi[k] = periodic ? last : std::min(last, domain.hi[k]);
    d.pad_lo[i] = read.lo[k] - first;
    d.pad_hi[i] = last - read.hi[k];
  }
  const Tensor xw = saved_x_.window(read);
  cs::set_x_window(d, xw);
  const Box out_box = p.driver_spec.local_box(p.mesh.coords());
  const void* b = opts_.bias ? bias_.value.raw() : nullptr;
  if (piece == out_box) {
    kernels::conv_forward(Device::of(opts_.space), d, xw.raw(), weight_.value.raw(), b, y.raw());
    return;
  }
  // The kernel writes a dense y: a part of the block goes through a buffer.
  const Tensor part = Tensor::empty(piece.shape(), opts_.dtype, opts_.space);
  kernels::conv_forward(Device::of(opts_.space), d, xw.raw(), weight_.value.raw(), b, part.raw());
  y.view(relative_to(piece, out_box)).copy_from(part);
}

void ConvNd::forward_overlapped(const WindowPlan& p, const ShardTensor& x, const Tensor& y) {
  saved_x_ = HaloFrame();
  saved_x_.halo = HaloTensor::over(x, p.geometry.widths());
  saved_x_.buffer = saved_x_.halo.padded();
  saved_x_.box = saved_x_.halo.padded_box();
  p.exchange->begin(saved_x_.halo);
  const BlockWindow& bw = p.mine();
  const Box out_box = p.driver_spec.local_box(p.mesh.coords());
  Box interior;
  if (!bw.idle) {
    interior = interior_outputs(out_box, bw.owned, p.haloed_spec.partition().domain(), win_,
                                opts_.padding_mode == PaddingMode::Circular);
    forward_piece(p, interior, y);  // reads owned cells only, while ghosts arrive
  }
  p.exchange->finish();
  if (!bw.idle)
    for (const Box& slab : boundary_slabs(out_box, interior)) forward_piece(p, slab, y);
}

HaloWidths ConvNd::input_room(const Mesh& mesh, const ShardSpec& in) {
  if (pad_) return pad_->input_room(mesh, in);  // the Pad reads the input
  return tessera::input_room(plan_for(mesh, in));
}

ShardTensor ConvNd::backward(const ShardTensor& dy) {
  return backward_impl(dy, false);
}

ShardTensor ConvNd::backward_impl(const ShardTensor& dy, bool keep_room) {
  if (!pad_) return backward_conv(dy, keep_room);
  const ShardTensor g = backward_conv(dy, false);  // the padded input's gradient
  return keep_room ? pad_->backward_in_room(g) : pad_->backward(g);
}

ShardTensor ConvNd::backward_conv(const ShardTensor& dy, bool keep_room) {
  TESSERA_CHECK(have_saved_ && plan_, name() << ": backward without a forward");
  const WindowPlan& p = *plan_;
  cs::check_grad(dy, p.driver_spec, opts_.dtype, opts_.space, name());
  const BlockWindow& bw = p.mine();
  kernels::ConvDesc d = local_desc(opts_, win_, bw);
  Tensor dw = Tensor::zeros(weight_.value.shape(), opts_.dtype, opts_.space);
  Tensor db = opts_.bias ? Tensor::zeros({opts_.out_channels}, opts_.dtype, opts_.space) : Tensor();
  if (opts_.overlap && p.exchange) {
    // Input gradient first; its ghost parts travel while the weight gradient is computed.
    HaloFrame g = zero_frame(p, opts_.dtype, opts_.space, bw.idle ? nullptr : &bw.window);
    if (!bw.idle) {
      const Tensor gw = g.window(bw.window);
      cs::set_x_window(d, gw);
      kernels::conv_backward_data(Device::of(opts_.space), d, dy.local().raw(), weight_.value.raw(),
                                  gw.raw());
    }
    p.exchange->begin_adjoint(g.halo);
    if (!bw.idle) {
      const Tensor xw = saved_x_.window(bw.window);
      cs::set_x_window(d, xw);
      kernels::conv_backward_weights(Device::of(opts_.space), d, xw.raw(), dy.local().raw(),
                                     dw.raw(), opts_.bias ? db.raw() : nullptr);
    }
    p.exchange->finish_adjoint();
    saved_x_ = HaloFrame();
    have_saved_ = false;
    cs::accumulate_grad(weight_, dw, p.haloed_spec);
    if (opts_.bias) cs::accumulate_grad(bias_, db, p.haloed_spec);
    return owned_shard(p, g, keep_room);
  }
  if (!bw.idle) {
    const Tensor xw = saved_x_.window(bw.window);
    cs::set_x_window(d, xw);
    kernels::conv_backward_weights(Device::of(opts_.space), d, xw.raw(), dy.local().raw(), dw.raw(),
                                   opts_.bias ? db.raw() : nullptr);
  }
  saved_x_ = HaloFrame();  // free the saved input before the gradient buffer exists
  have_saved_ = false;
  HaloFrame g = zero_frame(p, opts_.dtype, opts_.space, bw.idle ? nullptr : &bw.window);
  if (!bw.idle) {
    const Tensor gw = g.window(bw.window);
    cs::set_x_window(d, gw);
    kernels::conv_backward_data(Device::of(opts_.space), d, dy.local().raw(), weight_.value.raw(),
                                gw.raw());
  }
  add_ghosts_to_owners(p, g);
  cs::accumulate_grad(weight_, dw, p.haloed_spec);
  if (opts_.bias) cs::accumulate_grad(bias_, db, p.haloed_spec);
  return owned_shard(p, g, keep_room);
}

OpCost ConvNd::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  const ShardSpec padded = pad_ ? pad_->output_spec(in) : in;
  OpCost c = pad_ ? pad_->cost(in, padded, opts_.dtype) : OpCost{};
  (void)dtype;  // the layer's own
  c += cs::direct_conv_cost(padded, out, win_, opts_.in_channels / opts_.groups,
                            weight_.value.numel() + (opts_.bias ? bias_.value.numel() : 0),
                            opts_.padding_mode == PaddingMode::Circular, opts_.dtype);
  // The conv keeps the padded copy, larger than the input the graph counts as kept.
  if (pad_)
    c.saved_bytes += std::max(0.0, (busiest_elems(padded) - busiest_elems(in)) *
                                       static_cast<double>(size_of(opts_.dtype)));
  return c;
}

std::vector<Parameter*> ConvNd::parameters() {
  if (opts_.bias) return {&weight_, &bias_};
  return {&weight_};
}

std::unique_ptr<ConvNd> token_linear(int nd, Index cin, Index cout, DType dtype, MemSpace space,
                                     unsigned seed, const std::string& prefix) {
  ConvOptions c;
  c.nd = nd;
  c.in_channels = cin;
  c.out_channels = cout;
  c.kernel = {1};
  c.dtype = dtype;
  c.space = space;
  c.seed = seed;
  auto conv = std::make_unique<ConvNd>(c);
  if (!prefix.empty()) {
    conv->weight().name = prefix + ".weight";
    conv->bias()->name = prefix + ".bias";
  }
  return conv;
}

}  // namespace tessera
