#include "runtime/nn/norm_layers.hpp"

#include <cmath>
#include <cstring>

#include "kernels/norm.hpp"
#include "kernels/reduce.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

namespace {
using kernels::StatLayout;

// count float64 values in memory space `s` (the kernels take device pointers on CUDA).
Tensor doubles_in(const std::vector<double>& v, MemSpace s) {
  Tensor t = Tensor::empty({static_cast<Index>(v.size())}, DType::f64);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(double));
  return t.in_space(s);
}
std::vector<double> host_doubles(const Tensor& t) {
  const Tensor h = t.in_space(MemSpace::Host);
  std::vector<double> v(static_cast<std::size_t>(h.numel()));
  if (!v.empty()) std::memcpy(v.data(), h.raw(), v.size() * sizeof(double));
  return v;
}

// sum (and sumsq) per statistics group of the local x, on the host.
void local_sums(const StatLayout& l, Index n, DType t, const Tensor& x, std::vector<double>& sum,
                std::vector<double>* sumsq) {
  sum.assign(static_cast<std::size_t>(n), 0.0);
  if (sumsq) sumsq->assign(static_cast<std::size_t>(n), 0.0);
  if (l.elements() == 0 || n == 0) return;
  // Into a buffer in x's memory space (the kernels write device memory on CUDA), then here.
  Tensor s = Tensor::empty({n}, DType::f64, x.space());
  Tensor q = Tensor::empty({n}, DType::f64, x.space());
  kernels::stat_sums(x.device(), l, t, x.raw(), s.data<double>(),
                     sumsq ? q.data<double>() : nullptr);
  sum = host_doubles(s);
  if (sumsq) *sumsq = host_doubles(q);
}

void norm_forward(const kernels::NormArgs& a, const Tensor& x, const Tensor& y) {
  if (a.layout.elements() == 0) return;
  kernels::norm_forward(x.device(), a, x.raw(), y.raw());
}

Index spatial_volume(const std::vector<Index>& shape) {
  Index v = 1;
  for (std::size_t d = 2; d < shape.size(); ++d) v *= shape[d];
  return v;
}
}  // namespace

struct NormLayer::Saved {
  ShardTensor x;  // its spec is the output's
  kernels::StatLayout layout;
  double M = 1;                // cells per global statistics group
  std::vector<int> stat_axes;  // mesh axes each statistic is summed over
  Tensor mean, rstd;           // layout.count() doubles, in x's memory space
  bool batch_stats = true;
  Index c0 = 0;  // first local channel
};

NormLayer::NormLayer(Kind kind, Index channels, Index groups, const NormOptions& opts)
    : kind_(kind), channels_(channels), groups_(groups), opts_(opts) {
  TESSERA_CHECK(channels >= 1, name() << ": channels = " << channels << ", must be >= 1");
  TESSERA_CHECK(groups >= 1 && channels % groups == 0,
                name() << ": " << groups << " groups do not divide " << channels << " channels");
  TESSERA_CHECK(opts.eps >= 0 && std::isfinite(opts.eps),
                name() << ": eps = " << opts.eps << ", must be finite and >= 0");
  TESSERA_CHECK(opts.momentum >= 0 && opts.momentum <= 1,
                name() << ": momentum = " << opts.momentum << ", must lie in [0, 1]");
  kernel_scalar(opts.dtype, "NormLayer");
  gamma_ = make_param("weight", {channels}, 1.0, opts.dtype, opts.space);
  beta_ = make_param("bias", {channels}, 0.0, opts.dtype, opts.space);
}

NormLayer::~NormLayer() = default;

BatchNorm::BatchNorm(Index channels, const NormOptions& opts)
    : NormLayer(Kind::Batch, channels, 1, opts) {
  running_mean_.assign(static_cast<std::size_t>(channels), 0.0);
  running_var_.assign(static_cast<std::size_t>(channels), 1.0);
}

void BatchNorm::set_running_stats(std::vector<double> mean, std::vector<double> var) {
  TESSERA_CHECK(
      static_cast<Index>(mean.size()) == channels() && static_cast<Index>(var.size()) == channels(),
      "BatchNorm: running statistics of " << mean.size() << " and " << var.size() << " entries for "
                                          << channels() << " channels");
  for (double v : var) TESSERA_CHECK(v >= 0, "BatchNorm: running variance " << v << " is negative");
  running_mean_ = std::move(mean);
  running_var_ = std::move(var);
}

std::vector<Parameter*> NormLayer::parameters() {
  if (!opts_.affine) return {};
  return {&gamma_, &beta_};
}

void NormLayer::release_saved() {
  saved_.reset();
}

std::string NormLayer::name() const {
  switch (kind_) {
    case Kind::Group:
      return "GroupNorm";
    case Kind::Batch:
      return "BatchNorm";
    case Kind::ChannelLayer:
      return "ChannelLayerNorm";
  }
  return "NormLayer";
}

ShardSpec NormLayer::output_spec(const ShardSpec& in) const {
  TESSERA_CHECK(!in.has_partial(),
                name() << ": input has Partial axes (" << in.str() << "); redistribute first");
  TESSERA_CHECK(in.ndim() >= 2,
                name() << ": input of rank " << in.ndim() << ", expected (N, C, spatial...)");
  TESSERA_CHECK(in.global_shape()[1] == channels_, name() << ": input has " << in.global_shape()[1]
                                                          << " channels, the layer " << channels_);
  if (kind_ == Kind::Group && in.placement(1).sharded()) {
    const Index per = channels_ / groups_;
    Index off = 0;
    for (Index s : in.sizes(1)) {
      off += s;
      TESSERA_CHECK(off % per == 0, name()
                                        << ": channel shards " << in.str() << " split a group of "
                                        << per << " channels; shard C at group boundaries");
    }
  }
  return in;
}

ShardTensor NormLayer::forward(const ShardTensor& x) {
  saved_.reset();  // a forward without backward (evaluation) leaves nothing behind
  check_layer_input(x, 2, kMaxDims, name());
  output_spec(x.spec());
  TESSERA_CHECK(x.dtype() == opts_.dtype && x.local().space() == opts_.space,
                name() << ": input is " << name_of(x.dtype()) << " in "
                       << name_of(x.local().space()) << " memory, the layer's parameters "
                       << name_of(opts_.dtype) << " in " << name_of(opts_.space));
  const DType t = kernel_scalar(x.dtype(), "NormLayer");
  const ShardSpec& spec = x.spec();
  const Tensor& xl = x.local();
  const Box box = x.local_box();
  const Index n = box.extent(0), c = box.extent(1);
  Index inner = 1;
  for (int d = 2; d < spec.ndim(); ++d) inner *= box.extent(d);

  auto s = std::make_unique<Saved>();
  s->x = x;
  s->c0 = box.lo[1];
  s->batch_stats = use_batch_stats_;
  const Index vol = spatial_volume(spec.global_shape());
  s->stat_axes = axes_sharding_dims(spec, stat_dims(spec.ndim()));
  switch (kind_) {
    case Kind::Group:
      s->layout = StatLayout::per_group(n, c, inner, c / (channels_ / groups_));
      s->M = static_cast<double>((channels_ / groups_) * vol);
      break;
    case Kind::Batch:
      s->layout = StatLayout::per_channel(n, c, inner);
      s->M = static_cast<double>(spec.global_shape()[0] * vol);
      break;
    case Kind::ChannelLayer:
      s->layout = StatLayout::per_position(n, c, inner);
      s->M = static_cast<double>(channels_);
      break;
  }
  if (kind_ == Kind::Group && c == 0) s->layout.groups = 1;  // no channels: no groups
  const StatLayout& l = s->layout;
  // Statistics this rank holds; the ranks it reduces with hold the same ones.
  const Index count = kind_ == Kind::Group && c == 0 ? 0 : l.count();
  TESSERA_CHECK(s->M > 0, name() << ": empty statistics groups (input " << spec.str() << ")");
  // One value per channel has no spread: the output would be 0 and the running variance
  // a guess (PyTorch refuses it too). M is global, so every rank refuses together.
  TESSERA_CHECK(kind_ != Kind::Batch || !use_batch_stats_ || s->M > 1,
                name() << ": batch statistics of one value per channel (input " << spec.str()
                       << "); use a batch or grid with more values, or the running statistics");

  Tensor y = Tensor::empty(xl.shape(), xl.dtype(), xl.space());
  kernels::NormArgs a;
  a.layout = l;
  a.type = t;
  std::vector<double> mean(count), var(count);
  if (use_batch_stats_) {
    // Pass 1: the mean.
    std::vector<double> sum;
    local_sums(l, count, t, xl, sum, nullptr);
    allreduce_sum(x.mesh(), s->stat_axes, sum.data(), count);
    for (Index g = 0; g < count; ++g) mean[g] = sum[g] / s->M;
    // Pass 2: deviations about it (y holds x - mean for the moment). The sum of the
    // deviations themselves corrects the rounding of the mean (corrected two-pass).
    const Tensor mean_t = doubles_in(mean, xl.space());
    const Tensor ones = doubles_in(std::vector<double>(count, 1.0), xl.space());
    a.mean = mean_t.data<double>();
    a.rstd = ones.data<double>();
    norm_forward(a, xl, y);
    std::vector<double> d1, d2;
    local_sums(l, count, t, y, d1, &d2);
    d1.insert(d1.end(), d2.begin(), d2.end());
    allreduce_sum(x.mesh(), s->stat_axes, d1.data(), 2 * count);
    for (Index g = 0; g < count; ++g)
      var[g] = std::max(0.0, (d1[count + g] - d1[g] * d1[g] / s->M) / s->M);
    if (kind_ == Kind::Batch && !replay_) {
      // Every rank keeps all C running statistics: channel shards share theirs.
      std::vector<double> full(2 * channels_, 0.0);
      for (Index i = 0; i < count; ++i) {
        full[s->c0 + i] = mean[i];
        full[channels_ + s->c0 + i] = var[i];
      }
      allreduce_sum(x.mesh(), axes_sharding_dims(spec, {1}), full.data(), 2 * channels_);
      const double m = opts_.momentum;
      const double unbias = s->M > 1 ? s->M / (s->M - 1) : 1.0;
      for (Index ch = 0; ch < channels_; ++ch) {
        running_mean_[ch] = (1 - m) * running_mean_[ch] + m * full[ch];
        running_var_[ch] = (1 - m) * running_var_[ch] + m * full[channels_ + ch] * unbias;
      }
    }
  } else {
    for (Index i = 0; i < count; ++i) {
      mean[i] = running_mean_[s->c0 + i];
      var[i] = running_var_[s->c0 + i];
    }
  }
  std::vector<double> rstd(count);
  for (Index g = 0; g < count; ++g) rstd[g] = 1.0 / std::sqrt(var[g] + opts_.eps);
  s->mean = doubles_in(mean, xl.space());
  s->rstd = doubles_in(rstd, xl.space());
  a.mean = s->mean.data<double>();
  a.rstd = s->rstd.data<double>();
  if (opts_.affine && c > 0) {
    a.gamma = gamma_.value.view(Box({s->c0}, {s->c0 + c})).raw();
    a.beta = beta_.value.view(Box({s->c0}, {s->c0 + c})).raw();
  }
  norm_forward(a, xl, y);
  saved_ = std::move(s);
  return ShardTensor::unchecked(x.mesh(), spec, y);
}

ShardTensor NormLayer::backward(const ShardTensor& dy) {
  TESSERA_CHECK(saved_, name() << ": backward before forward");
  Saved& s = *saved_;
  check_output_grad(dy, s.x.spec(), s.x.dtype(), s.x.local().space(), name());
  const Tensor& xl = s.x.local();
  const Tensor g = dy.local().contiguous();
  const Index c = s.x.local_box().extent(1);
  const Index count = s.mean.numel();
  const bool empty = xl.numel() == 0;
  const MemSpace sp = xl.space();
  kernels::NormArgs a;
  a.layout = s.layout;
  a.type = kernel_scalar(xl.dtype(), "NormLayer");
  a.mean = s.mean.data<double>();
  a.rstd = s.rstd.data<double>();
  if (opts_.affine && c > 0) a.gamma = gamma_.value.view(Box({s.c0}, {s.c0 + c})).raw();

  // S1 = sum(dy*gamma), S2 = sum(dy*gamma*xhat) over each global group; zero (no
  // dependence of the statistics on x) in eval mode.
  std::vector<double> S(2 * count, 0.0);
  if (s.batch_stats && !empty) {
    Tensor t = Tensor::empty({2 * count}, DType::f64, sp);
    kernels::norm_backward_sums(xl.device(), a, xl.raw(), g.raw(), t.data<double>(),
                                t.data<double>() + count);
    S = host_doubles(t);
  }
  if (s.batch_stats) allreduce_sum(dy.mesh(), s.stat_axes, S.data(), 2 * count);
  Tensor dx = Tensor::empty(xl.shape(), xl.dtype(), sp);
  if (!empty) {
    const Tensor St = doubles_in(S, sp);
    const double* S1 = St.data<double>();
    kernels::norm_backward_dx(xl.device(), a, xl.raw(), g.raw(), S1, S1 + count, s.M, dx.raw());
  }
  if (opts_.affine) {
    // This rank's channels [c0, c0 + c): its share, summed over the sharding axes by GradSync.
    Tensor t = Tensor::zeros({2 * c}, DType::f64, sp);
    if (!empty) {
      kernels::norm_param_grads(xl.device(), a, xl.raw(), g.raw(), t.data<double>(),
                                t.data<double>() + c);
    }
    const std::vector<int> axes = sharding_axes(s.x.spec());
    add_param_grad(axes, t.view(Box({0}, {c})), s.c0, gamma_);
    add_param_grad(axes, t.view(Box({c}, {2 * c})), s.c0, beta_);
  }
  ShardTensor out = ShardTensor::unchecked(dy.mesh(), s.x.spec(), dx);
  saved_.reset();  // what forward saved goes as soon as it has served
  return out;
}

std::vector<int> NormLayer::stat_dims(int ndim) const {
  if (kind_ == Kind::ChannelLayer) return {1};
  std::vector<int> dims;
  for (int d = 2; d < ndim; ++d) dims.push_back(d);
  if (kind_ == Kind::Batch) dims.push_back(0);
  return dims;
}

OpCost NormLayer::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  (void)out;
  const int axes = reducing_axes(in, axes_sharding_dims(in, stat_dims(in.ndim())));
  const double es = static_cast<double>(size_of(dtype));
  return busiest(in, [&](const std::vector<int>& coords) {
    OpCost c;
    const Box b = in.local_box(coords);
    const double x = static_cast<double>(b.volume());
    c.flops = 16 * x;      // two passes forward, two backward
    c.bytes = 7 * x * es;  // x twice, y; x, dy twice, dx
    Index count = 0;       // statistics this rank holds
    if (kind_ == Kind::Group) count = b.extent(1) == 0 ? 0 : b.extent(0) * groups_;
    if (kind_ == Kind::Batch) count = b.extent(1);
    if (kind_ == Kind::ChannelLayer) count = b.extent(1) == 0 ? 0 : b.volume() / b.extent(1);
    c.allreduces = 3 * axes;
    c.allreduce_bytes = 5 * count * 8 * axes;
    if (kind_ == Kind::Batch) {  // the running statistics, shared over channel shards
      const int channel_axes = reducing_axes(in, axes_sharding_dims(in, {1}));
      c.allreduces += channel_axes;
      c.allreduce_bytes += 2 * channels_ * 8 * channel_axes;
    }
    return c;
  });
}

}  // namespace tessera
