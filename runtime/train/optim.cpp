#include "runtime/train/optim.hpp"

#include <cmath>
#include <map>
#include <numbers>

#include "kernels/elementwise.hpp"
#include "kernels/optim_update.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "runtime/nn/state_dict.hpp"
#include "runtime/train/flat_runs.hpp"

namespace tessera {

void Optimizer::set_lr(double lr) {
  TESSERA_CHECK(std::isfinite(lr) && lr >= 0,
                "optimizer: learning rate " << lr << " is not a finite number >= 0");
  lr_ = lr;
}

Optimizer::Optimizer(std::vector<NamedParameter> params, double lr)
    : params_(std::move(params)), lr_(lr) {
  set_lr(lr);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const NamedParameter& np = params_[i];
    TESSERA_CHECK(np.param != nullptr, "optimizer: parameter '" << np.name << "' is null");
    for (std::size_t j = 0; j < i; ++j) {  // it would take two steps each step
      TESSERA_CHECK(params_[j].param != np.param, "optimizer: parameter '"
                                                      << np.name << "' is listed twice (also as '"
                                                      << params_[j].name << "')");
      // The state is saved and loaded by name: two of one name would share one entry.
      TESSERA_CHECK(params_[j].name != np.name,
                    "optimizer: two parameters are named '" << np.name << "'");
    }
    const Parameter& p = *np.param;
    TESSERA_CHECK(layout_problem(p).empty(), "optimizer: " << layout_problem(p));
    TESSERA_CHECK(p.value.dtype() == DType::f32 || p.value.dtype() == DType::f64,
                  "optimizer: parameter '" << np.name << "' is " << name_of(p.value.dtype())
                                           << "; needs float32 or float64");
    TESSERA_CHECK(p.grad.defined() && p.grad.shape() == p.value.shape() &&
                      p.grad.dtype() == p.value.dtype() && p.grad.space() == p.value.space(),
                  "optimizer: parameter '"
                      << np.name << "' has no gradient like its value (shape, dtype, memory)");
    TESSERA_CHECK(p.value.is_contiguous() && p.grad.is_contiguous(),
                  "optimizer: parameter '" << np.name << "' is not contiguous");
  }
  state_.resize(params_.size());
}

void Optimizer::plan() {
  std::vector<const void*> now;
  for (const NamedParameter& np : params_) {
    now.push_back(np.param->value.raw());
    now.push_back(np.param->grad.raw());
  }
  if (now == planned_ && (!buckets_.empty() || params_.empty())) return;
  const auto suffixes = state_suffixes();
  state_.resize(params_.size());
  std::vector<Bucket> buckets;
  for (const FlatRun& r : flat_runs(params_, true)) {
    Bucket b;
    const Parameter& first = *params_[r.params.front()].param;
    b.span = Span{r.dtype, r.space, r.numel, first.value.raw(), first.grad.raw(), {}};
    for (std::size_t w = 0; w < suffixes.size(); ++w) {
      b.state.push_back(Tensor::zeros({r.numel}, r.dtype, r.space));
      b.span.state.push_back(b.state.back().raw());
    }
    // Each parameter's state becomes a view into the flat state, keeping its values.
    Index off = 0;
    for (std::size_t k : r.params) {
      const Tensor& v = params_[k].param->value;
      auto& st = state_[k];
      st.resize(suffixes.size());
      for (std::size_t w = 0; w < suffixes.size(); ++w) {
        const Tensor view = b.state[w].view(Box({off}, {off + v.numel()})).reshape(v.shape());
        if (st[w].defined()) view.copy_from(st[w]);
        st[w] = view;
      }
      off += v.numel();
    }
    buckets.push_back(std::move(b));
  }
  buckets_ = std::move(buckets);
  planned_ = std::move(now);
}

void Optimizer::step() {
  ++step_;
  plan();
  for (const Bucket& b : buckets_) update(b.span, step_);
  state_started_ = true;
}

void Optimizer::zero_grad() const {
  for (const NamedParameter& np : params_) np.param->grad.zero();
}

std::vector<NamedTensor> Optimizer::state_entries() const {
  std::vector<NamedTensor> out;
  Tensor step = Tensor::empty({1}, DType::i64);
  step.data<std::int64_t>()[0] = step_;
  out.push_back({"step", step});
  const auto suffixes = state_suffixes();
  for (std::size_t k = 0; k < params_.size(); ++k)
    for (std::size_t w = 0; w < suffixes.size(); ++w) {
      const Parameter* p = params_[k].param;
      const bool have = w < state_[k].size() && state_[k][w].defined();
      // Global tensors: a sharded parameter's state gathered (collective, as every rank
      // walks the same list). A rank without state for its block (an empty block takes no
      // step) still joins the gather with zeros: skipping it made the ranks' collectives
      // differ (MPI_ERR_TRUNCATE in the next one).
      const Tensor local = have ? state_[k][w] : Tensor();
      out.push_back({params_[k].name + "." + suffixes[w], Tensor(),
                     [p, local] {
                       return gather_global(
                           *p, local.defined() ? local
                                               : Tensor::zeros(p->value.shape(), p->value.dtype()));
                     },
                     global_shape(*p), p->value.dtype()});
    }
  return out;
}

std::vector<NamedTensor> Optimizer::state() const {
  return made(state_entries());
}

void Optimizer::load_state(const std::vector<NamedTensor>& state) {
  auto find = [&](const std::string& name) -> const NamedTensor* {
    for (const NamedTensor& t : state)
      if (t.name == name) return &t;
    return nullptr;
  };
  const NamedTensor* step_entry = find("step");
  const Tensor step = step_entry ? step_entry->value() : Tensor();
  TESSERA_CHECK(step.defined() && step.numel() == 1 && step.dtype() == DType::i64,
                name() << " state: no int64 'step' entry");
  // A negative count made Adam's bias correction the root of a negative number (NaN).
  const std::int64_t steps = step.to(MemSpace::Host).data<std::int64_t>()[0];
  TESSERA_CHECK(steps >= 0, name() << " state: 'step' is " << steps << ", a count of steps >= 0");
  const auto suffixes = state_suffixes();
  bool nonzero = false;  // of the global tensors, so every rank decides alike
  std::vector<std::vector<Tensor>> loaded(params_.size());
  for (std::size_t k = 0; k < params_.size(); ++k)
    for (const std::string& suffix : suffixes) {
      const std::string key = params_[k].name + "." + suffix;
      const NamedTensor* e = find(key);
      const Parameter& p = *params_[k].param;
      const Tensor& v = p.value;
      TESSERA_CHECK(e != nullptr, name() << " state: no entry '" << key << "'");
      TESSERA_CHECK(e->shape() == global_shape(p),
                    name() << " state: '" << key << "' has shape " << shape_str(e->shape())
                           << ", the parameter " << shape_str(global_shape(p)));
      const Tensor t = e->value();  // one whole tensor at a time (entries made when used)
      Tensor dst = Tensor::empty(v.shape(), v.dtype(), v.space());
      dst.copy_from(host_converted(local_block(p, t), v.dtype()).to(v.space()));
      loaded[k].push_back(dst);
      const Tensor h = t.to(MemSpace::Host).contiguous();  // scanned as stored: no copy
      for (Index i = 0; i < h.numel() && !nonzero; ++i)
        nonzero = h.dtype() == DType::f64 ? h.data<double>()[i] != 0 : h.data<float>()[i] != 0;
    }
  state_ = std::move(loaded);
  state_started_ = steps > 0 || nonzero;
  buckets_.clear();  // the next step lays the loaded state out flat again
  planned_.clear();
  step_ = steps;
}

Sgd::Sgd(std::vector<NamedParameter> params, const SgdOptions& o)
    : Optimizer(std::move(params), o.lr), o_(o) {
  TESSERA_CHECK(o.lr >= 0 && std::isfinite(o.momentum) && o.momentum >= 0 &&
                    std::isfinite(o.weight_decay) && o.weight_decay >= 0,
                "sgd: lr, momentum and weight_decay must be finite and >= 0, not "
                    << o.lr << ", " << o.momentum << ", " << o.weight_decay);
  TESSERA_CHECK(o.dampening >= 0 && o.dampening <= 1,
                "sgd: dampening must lie in [0, 1], not " << o.dampening);
  TESSERA_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
                "sgd: nesterov needs momentum > 0 and dampening 0");
}

std::vector<std::string> Sgd::state_suffixes() const {
  if (o_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void Sgd::update(const Span& s, std::int64_t t) {
  kernels::SgdArgs a;
  a.lr = lr_;
  a.momentum = o_.momentum;
  a.dampening = o_.dampening;
  a.weight_decay = o_.weight_decay;
  a.nesterov = o_.nesterov;
  (void)t;
  a.first_step = !state_started_;
  void* buf = o_.momentum != 0 ? s.state[0] : nullptr;
  kernels::sgd_update(Device::of(s.space), s.type, s.n, s.value, s.grad, buf, a);
}

Adam::Adam(std::vector<NamedParameter> params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o.lr), o_(o), decoupled_(decoupled) {
  TESSERA_CHECK(o.lr >= 0 && std::isfinite(o.eps) && o.eps >= 0 && std::isfinite(o.weight_decay) &&
                    o.weight_decay >= 0,
                name() << ": lr, eps and weight_decay must be finite and >= 0, not " << o.lr << ", "
                       << o.eps << ", " << o.weight_decay);
  TESSERA_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
                name() << ": betas must lie in [0, 1)");
}

std::vector<std::string> Adam::state_suffixes() const {
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::update(const Span& s, std::int64_t t) {
  kernels::AdamArgs a;
  a.lr = lr_;
  a.beta1 = o_.beta1;
  a.beta2 = o_.beta2;
  a.eps = o_.eps;
  a.weight_decay = o_.weight_decay;
  a.decoupled = decoupled_;
  a.bias_correction1 = 1 - std::pow(o_.beta1, static_cast<double>(t));
  a.bias_correction2_sqrt = std::sqrt(1 - std::pow(o_.beta2, static_cast<double>(t)));
  kernels::adam_update(Device::of(s.space), s.type, s.n, s.value, s.grad, s.state[0], s.state[1],
                       a);
}

double LrSchedule::lr(std::int64_t s) const {
  TESSERA_CHECK(s >= 0, "LrSchedule: negative step " << s);
  // Rates below zero surfaced only mid-run, when the optimizer refused one.
  TESSERA_CHECK(kind != Kind::Cosine || (std::isfinite(min_lr) && min_lr >= 0),
                "LrSchedule: cosine min_lr must be finite and >= 0, not " << min_lr);
  TESSERA_CHECK(kind != Kind::Step || (std::isfinite(gamma) && gamma >= 0),
                "LrSchedule: step gamma must be finite and >= 0, not " << gamma);
  const bool warm = (kind == Kind::Warmup || kind == Kind::Cosine) && s < warmup_steps;
  if (warm) return base_lr * static_cast<double>(s + 1) / static_cast<double>(warmup_steps);
  switch (kind) {
    case Kind::Constant:
    case Kind::Warmup:
      return base_lr;
    case Kind::Cosine: {
      const double span =
          static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup_steps));
      const double p = std::min(1.0, static_cast<double>(s - warmup_steps) / span);
      return min_lr + (base_lr - min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * p));
    }
    case Kind::Step:
      TESSERA_CHECK(step_size >= 1, "LrSchedule: step_size must be >= 1");
      return base_lr * std::pow(gamma, static_cast<double>(s / step_size));
  }
  return base_lr;
}

double grad_norm(const std::vector<NamedParameter>& params) {
  std::vector<NamedParameter> replicated;
  // Sharded parameters: each block counted once, summed over the ranks of its shard axes.
  std::map<std::vector<int>, std::pair<double, const AxesComm*>> sharded;
  for (const NamedParameter& np : params) {
    const Parameter& p = *np.param;
    if (!p.shard) {
      replicated.push_back(np);
      continue;
    }
    auto& [sum, comm] = sharded.try_emplace(p.shard->axes, 0.0, &p.shard->comm).first->second;
    sum += kernels::sum_squares(p.grad.device(), p.grad.dtype(), p.grad.numel(), p.grad.raw());
  }
  double ss = 0;
  for (const FlatRun& r : flat_runs(replicated, false)) {
    const void* g = replicated[r.params.front()].param->grad.raw();
    ss += kernels::sum_squares(Device::of(r.space), r.dtype, r.numel, g);
  }
  for (auto& [axes, part] : sharded) {  // the same axes, in the same order, on every rank
    if (part.second->size() > 1)
      TESSERA_MPI(
          MPI_Allreduce(MPI_IN_PLACE, &part.first, 1, MPI_DOUBLE, MPI_SUM, part.second->comm()));
    ss += part.first;
  }
  return std::sqrt(ss);
}

double clip_grad_norm(const std::vector<NamedParameter>& params, double max_norm) {
  TESSERA_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got " << max_norm);
  const double norm = grad_norm(params);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1)
    for (const FlatRun& r : flat_runs(params, false)) {
      void* g = params[r.params.front()].param->grad.raw();
      kernels::scale(Device::of(r.space), r.dtype, r.numel, coef, g);
    }
  return norm;
}

}  // namespace tessera
