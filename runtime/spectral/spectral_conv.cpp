#include "runtime/spectral/spectral_conv.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kernels/spectral_mix.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

std::vector<Index> per_dim(const std::vector<Index>& v, int nd, const char* what) {
  TESSERA_CHECK(v.size() == 1 || static_cast<int>(v.size()) == nd,
                "SpectralConv: " << what << " needs 1 or " << nd << " values, not " << v.size());
  return v.size() == 1 ? std::vector<Index>(static_cast<std::size_t>(nd), v[0]) : v;
}

// Kept extent per spatial dim of the weights: 2m of a complex dim, m of the real (last).
std::vector<Index> weight_modes(const std::vector<Index>& modes) {
  std::vector<Index> k;
  for (std::size_t d = 0; d < modes.size(); ++d)
    k.push_back(d + 1 == modes.size() ? modes[d] : 2 * modes[d]);
  return k;
}

// The local box of a spectrum (N, C, kept...) spec as a box of the weights (C_in, C_out,
// kept...): all channels, this rank's modes.
Box weight_box(const Box& spectrum_box, Index cin, Index cout) {
  Box b = spectrum_box;
  b.lo[0] = 0;
  b.hi[0] = cin;
  b.lo[1] = 0;
  b.hi[1] = cout;
  return b;
}

kernels::MixShape mix_shape(const Tensor& x_hat, Index cout) {
  kernels::MixShape s;
  s.batch = x_hat.shape(0);
  s.cin = x_hat.shape(1);
  s.cout = cout;
  s.modes = 1;  // this rank's retained modes, flattened
  for (int d = 2; d < x_hat.ndim(); ++d) s.modes *= x_hat.shape(d);
  return s;
}

}  // namespace

SpectralConv::SpectralConv(const SpectralConvOptions& opts) : opts_(opts) {
  TESSERA_CHECK(opts.nd >= 1 && opts.nd <= 3, "SpectralConv: 1 to 3 spatial dims, not " << opts.nd);
  TESSERA_CHECK(opts.in_channels >= 1 && opts.out_channels >= 1,
                "SpectralConv: channels must be positive");
  TESSERA_CHECK(opts.dtype == DType::f32 || opts.dtype == DType::f64,
                "SpectralConv: float32 or float64 parameters, not " << name_of(opts.dtype));
  modes_ = per_dim(opts.modes, opts.nd, "modes");
  for (Index m : modes_) TESSERA_CHECK(m >= 1, "SpectralConv: modes must be at least 1, not " << m);
  std::vector<Index> shape = {opts.in_channels, opts.out_channels};
  for (Index k : weight_modes(modes_)) shape.push_back(k);
  shape.push_back(2);
  // FNO's init, uniform in [0, 1 / (C_in C_out)), entry by entry a function of the seed and
  // the entry's index: mode-sharded weights are allocated when laid out, each rank's block
  // only, with the values the replicated layer holds.
  const double scale = 1.0 / static_cast<double>(opts.in_channels * opts.out_channels);
  const std::uint64_t seed = opts.seed;
  weight_.name = "weight";
  defer_value(weight_, {shape, opts.dtype, opts.space, [seed, scale](Index i) {
                          return scale * counter_uniform(seed, static_cast<std::uint64_t>(i));
                        }});
  if (!opts.shard_weights) {
    materialize(weight_);
    weight_.awaits_layout = false;
  }
}

void SpectralConv::release_saved() {
  x_hat_ = ShardTensor();
}

std::string SpectralConv::name() const {
  std::ostringstream o;
  o << "SpectralConv" << opts_.nd << "d(" << opts_.in_channels << " -> " << opts_.out_channels
    << ", modes";
  for (Index m : modes_) o << " " << m;
  if (opts_.shard_weights) o << ", mode-sharded";
  o << ")";
  return o.str();
}

ShardSpec SpectralConv::output_spec(const ShardSpec& in) const {
  check_spatial_spec(in, opts_.nd, name());
  TESSERA_CHECK(in.global_shape()[1] == opts_.in_channels,
                name() << ": input has " << in.global_shape()[1] << " channels");
  TESSERA_CHECK(!in.placement(1).sharded(),
                name() << ": the channel dim is sharded; spectral mixing needs whole channels");
  std::vector<Index> shape = in.global_shape();
  shape[1] = opts_.out_channels;
  std::vector<std::vector<Index>> sizes(static_cast<std::size_t>(in.ndim()));
  for (int d = 0; d < in.ndim(); ++d)
    if (in.placement(d).sharded()) sizes[static_cast<std::size_t>(d)] = in.sizes(d);
  return ShardSpec(shape, in.placements(), in.mesh_dims(), {}, sizes);
}

FftOptions SpectralConv::fft_options(const ShardSpec* spectrum) const {
  FftOptions o;
  o.modes = modes_;
  // The output spectrum in the same layout as the input's, so each rank mixes its modes.
  if (spectrum)
    for (const Placement& p : spectrum->placements()) o.spectrum_axis.push_back(p.axis);
  return o;
}

bool SpectralConv::plan_for(const Mesh& mesh, const ShardSpec& in) {
  if (fft_in_ && in == in_spec_) return false;
  const ShardSpec out = output_spec(in);
  for (int d = 0; d < opts_.nd; ++d) {
    const Index n = in.global_shape()[static_cast<std::size_t>(d + 2)];
    const bool real = d + 1 == opts_.nd;
    const Index m = modes_[static_cast<std::size_t>(d)];
    TESSERA_CHECK(real ? m <= n / 2 + 1 : 2 * m <= n,
                  name() << ": " << m << " modes along spatial dim " << d << " need at least "
                         << (real ? 2 * (m - 1) : 2 * m) << " points, the grid has " << n);
  }
  fft_in_ = std::make_unique<DistFft>(mesh, in, opts_.dtype, fft_options());
  fft_out_ =
      std::make_unique<DistFft>(mesh, out, opts_.dtype, fft_options(&fft_in_->spectrum_spec()));
  in_spec_ = in;
  mesh_ = mesh;
  return true;
}

std::vector<int> SpectralConv::mode_axes() const {
  const ShardSpec& s = fft_in_->spectrum_spec();
  return axes_sharding_dims(s, token_dims(s.ndim()));
}

std::vector<int> SpectralConv::batch_axes() const {
  return axes_sharding_dims(fft_in_->spectrum_spec(), {0, 1});
}

void SpectralConv::bind(const Mesh& mesh, const ShardSpec& in) {
  plan_for(mesh, in);
  bind_weights();
}

void SpectralConv::bind_weights() {
  if (!opts_.shard_weights) return;
  const Box block = weight_block();
  if (!weight_.shard) {
    shard_parameter(weight_, mesh_, block, mode_axes());
    return;
  }
  // The blocks are fixed once laid out (GradSync and the optimizer hold them): another
  // decomposition of the spectrum is refused on every rank, not on some.
  const bool same = weight_.shard->block == block && weight_.shard->axes == mode_axes();
  collective_check(mesh_.comm(), same,
                   name() +
                       ": its mode-sharded weights are laid out for another decomposition "
                       "of the spectrum; build the layer anew and load the weights "
                       "(a checkpoint holds them whole) for this one");
}

Box SpectralConv::weight_block() const {
  const Box b = weight_box(fft_in_->spectrum_spec().local_box(mesh_.coords()), opts_.in_channels,
                           opts_.out_channels);
  Box wb = Box::from_shape(global_shape(weight_));  // the trailing (re, im) dim whole
  for (int d = 0; d < b.ndim; ++d) {
    wb.lo[d] = b.lo[d];
    wb.hi[d] = b.hi[d];
  }
  return wb;
}

Tensor SpectralConv::local_weight() const {
  if (weight_.shard) return weight_.value.view_as_complex();  // the block is all it holds
  return weight_.value.view(weight_block()).contiguous().view_as_complex();
}

ShardTensor SpectralConv::forward(const ShardTensor& x) {
  check_layer_input(x, opts_.nd + 2, opts_.nd + 2, name());
  TESSERA_CHECK(x.dtype() == opts_.dtype && x.local().space() == opts_.space,
                name() << ": input is " << name_of(x.dtype()) << " in "
                       << name_of(x.local().space()) << " memory, the layer's parameters "
                       << name_of(opts_.dtype) << " in " << name_of(opts_.space));
  // Laid out again when the plan changes, or when a layout failed (the weights still wait).
  if (plan_for(x.mesh(), x.spec()) || weight_.awaits_layout) bind_weights();
  x_hat_ = fft_in_->forward(x);
  const Tensor& xh = x_hat_.local();
  const kernels::MixShape s = mix_shape(xh, opts_.out_channels);
  std::vector<Index> yshape = xh.shape();
  yshape[1] = opts_.out_channels;
  Tensor yh = Tensor::empty(yshape, xh.dtype(), xh.space());
  const Tensor w = local_weight();
  kernels::spectral_mix(xh.device(), xh.dtype(), s, xh.raw(), w.raw(), yh.raw());
  return fft_out_->inverse(ShardTensor::unchecked(mesh_, fft_out_->spectrum_spec(), yh), true);
}

ShardTensor SpectralConv::backward(const ShardTensor& dy) {
  TESSERA_CHECK(fft_out_ && x_hat_.local().defined(), name() << ": backward before forward");
  check_output_grad(dy, fft_out_->input_spec(), opts_.dtype, opts_.space, name());
  const ShardTensor dyh = fft_out_->inverse_adjoint(dy);
  const Tensor& g = dyh.local();
  const Tensor& xh = x_hat_.local();
  const kernels::MixShape s = mix_shape(xh, opts_.out_channels);
  // Weight gradient of this rank's modes, added into its block of the full gradient (of the
  // block it holds, when sharded: partial only over the batch's axes).
  const Tensor w = local_weight();
  Tensor dw = Tensor::zeros(w.shape(), w.dtype(), w.space());
  kernels::spectral_mix_dw(g.device(), g.dtype(), s, xh.raw(), g.raw(), dw.raw());
  if (weight_.shard) {
    add_into(weight_.grad, dw.view_as_real());
    weight_.grad_axes = batch_axes();
  } else {
    const Tensor block = weight_.grad.view(weight_block());
    Tensor sum = block.contiguous();
    add_into(sum, dw.view_as_real());
    block.copy_from(sum);
    weight_.grad_axes = sharding_axes(fft_in_->spectrum_spec());
  }
  Tensor dxh = Tensor::empty(xh.shape(), xh.dtype(), xh.space());
  kernels::spectral_mix_dx(g.device(), g.dtype(), s, g.raw(), w.raw(), dxh.raw());
  release_saved();  // served
  return fft_in_->forward_adjoint(ShardTensor::unchecked(mesh_, fft_in_->spectrum_spec(), dxh),
                                  true);
}

namespace {
// One pass through an FFT plan (forward or inverse: the same stages, the same volumes) on the
// rank at `coords`: transforms at 5 n log2 n flops per complex line (half for the real dim),
// one read and write of the data per transform stage, and each move's all-to-all.
OpCost fft_pass_cost(const FftPlan& p, const std::vector<int>& coords, double real_size) {
  OpCost c;
  double es = real_size;  // real until the first transform, complex after
  for (std::size_t i = 0; i < p.stages.size(); ++i) {
    const FftStage& st = p.stages[i];
    const double before = local_elems(p.specs[i], coords);
    if (st.kind == FftStage::Kind::Move) {
      c.alltoall_bytes +=
          elements_sent(p.specs[i], p.specs[i + 1], coords) * static_cast<std::int64_t>(es);
      ++c.alltoalls;
      c.bytes += 2 * before * es;  // pack and unpack
      continue;
    }
    const double lg = std::log2(static_cast<double>(std::max<Index>(st.n, 2)));
    c.flops += (st.real ? 2.5 : 5.0) * before * lg;
    es = 2 * real_size;
    c.bytes += (before + local_elems(p.specs[i + 1], coords)) * es;
  }
  return c;
}
}  // namespace

OpCost SpectralConv::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  (void)dtype;  // the layer's own
  const FftPlan pin = plan_dist_fft(in, fft_options());
  const FftPlan pout = plan_dist_fft(out, fft_options(&pin.specs.back()));
  const double es = static_cast<double>(size_of(opts_.dtype));
  return busiest(in, [&](const std::vector<int>& coords) {
    OpCost c;
    for (int pass = 0; pass < 2; ++pass) {  // forward: F x, F^-1 y; backward: their adjoints
      c += fft_pass_cost(pin, coords, es);
      c += fft_pass_cost(pout, coords, es);
    }
    // Per retained mode and sample, a (C_in x C_out) complex product: 8 flops per pair, for
    // the output, the weight gradient and the input gradient.
    const double modes_here = local_elems(pin.specs.back(), coords) /
                              static_cast<double>(std::max<Index>(opts_.in_channels, 1));
    const double pairs = modes_here * static_cast<double>(opts_.out_channels);
    c.flops += 3 * 8 * pairs * static_cast<double>(opts_.in_channels);
    c.bytes += 3 * 2 * es *
               (local_elems(pin.specs.back(), coords) + local_elems(pout.specs.back(), coords));
    c.saved_bytes = 2 * es * local_elems(pin.specs.back(), coords);  // the input spectrum
    // Mode-sharded weights: no gradient reduction unless the spectrum's batch is split.
    const ShardSpec& sp = pin.specs.back();
    if (opts_.shard_weights && !sp.placement(0).sharded() && !sp.placement(1).sharded())
      c.whole_grad_elems = numel_of(global_shape(weight_));
    return c;
  });
}

}  // namespace tessera
