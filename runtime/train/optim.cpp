#include "runtime/train/optim.hpp"

#include <cmath>
#include <numbers>

#include "kernels/optim_update.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

DType scalar_of(const Tensor& t) {
  return t.dtype() == DType::f64 ? DType::f64 : DType::f32;
}

}  // namespace

Optimizer::Optimizer(std::vector<NamedParameter> params, double lr)
    : params_(std::move(params)), lr_(lr) {
  for (const NamedParameter& np : params_) {
    TESSERA_CHECK(np.param != nullptr, "optimizer: parameter '" << np.name << "' is null");
    const Parameter& p = *np.param;
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

Tensor& Optimizer::buffer(std::size_t k, std::size_t which) {
  auto& s = state_[k];
  if (s.size() <= which) s.resize(which + 1);
  if (!s[which].defined()) {
    const Tensor& v = params_[k].param->value;
    s[which] = Tensor::zeros(v.shape(), v.dtype(), v.space());
  }
  return s[which];
}

void Optimizer::step() {
  ++step_;
  for (std::size_t k = 0; k < params_.size(); ++k) update(k, step_);
}

void Optimizer::zero_grad() const {
  for (const NamedParameter& np : params_) np.param->grad.zero();
}

std::vector<NamedTensor> Optimizer::state() const {
  std::vector<NamedTensor> out;
  Tensor step = Tensor::empty({1}, DType::i64);
  step.data<std::int64_t>()[0] = step_;
  out.push_back({"step", step});
  const auto suffixes = state_suffixes();
  for (std::size_t k = 0; k < params_.size(); ++k)
    for (std::size_t w = 0; w < suffixes.size(); ++w) {
      const Tensor& v = params_[k].param->value;
      const bool have = w < state_[k].size() && state_[k][w].defined();
      out.push_back({params_[k].name + "." + suffixes[w],
                     have ? state_[k][w].to(MemSpace::Host) : Tensor::zeros(v.shape(), v.dtype())});
    }
  return out;
}

void Optimizer::load_state(const std::vector<NamedTensor>& state) {
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const NamedTensor& t : state)
      if (t.name == name) return &t.tensor;
    return nullptr;
  };
  const Tensor* step = find("step");
  TESSERA_CHECK(step && step->numel() == 1 && step->dtype() == DType::i64,
                name() << " state: no int64 'step' entry");
  const auto suffixes = state_suffixes();
  std::vector<std::vector<Tensor>> loaded(params_.size());
  for (std::size_t k = 0; k < params_.size(); ++k)
    for (const std::string& suffix : suffixes) {
      const std::string key = params_[k].name + "." + suffix;
      const Tensor* t = find(key);
      const Tensor& v = params_[k].param->value;
      TESSERA_CHECK(t != nullptr, name() << " state: no entry '" << key << "'");
      TESSERA_CHECK(t->shape() == v.shape(), name() << " state: '" << key << "' has shape "
                                                    << shape_str(t->shape()) << ", the parameter "
                                                    << shape_str(v.shape()));
      Tensor dst = Tensor::empty(v.shape(), v.dtype(), v.space());
      dst.copy_from(host_converted(*t, v.dtype()).to(v.space()));
      loaded[k].push_back(dst);
    }
  state_ = std::move(loaded);
  step_ = step->to(MemSpace::Host).data<std::int64_t>()[0];
}

Sgd::Sgd(std::vector<NamedParameter> params, const SgdOptions& o)
    : Optimizer(std::move(params), o.lr), o_(o) {
  TESSERA_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0,
                "sgd: lr, momentum and weight_decay must be >= 0");
  TESSERA_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
                "sgd: nesterov needs momentum > 0 and dampening 0");
}

std::vector<std::string> Sgd::state_suffixes() const {
  if (o_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void Sgd::update(std::size_t k, std::int64_t t) {
  const Parameter& p = *params_[k].param;
  kernels::SgdArgs a;
  a.lr = lr_;
  a.momentum = o_.momentum;
  a.dampening = o_.dampening;
  a.weight_decay = o_.weight_decay;
  a.nesterov = o_.nesterov;
  a.first_step = t == 1;
  void* buf = o_.momentum != 0 ? buffer(k, 0).raw() : nullptr;
  kernels::sgd_update(p.value.device(), scalar_of(p.value), p.value.numel(), p.value.raw(),
                      p.grad.raw(), buf, a);
}

Adam::Adam(std::vector<NamedParameter> params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o.lr), o_(o), decoupled_(decoupled) {
  TESSERA_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0,
                name() << ": lr, eps and weight_decay must be >= 0");
  TESSERA_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
                name() << ": betas must lie in [0, 1)");
}

std::vector<std::string> Adam::state_suffixes() const {
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::update(std::size_t k, std::int64_t t) {
  const Parameter& p = *params_[k].param;
  kernels::AdamArgs a;
  a.lr = lr_;
  a.beta1 = o_.beta1;
  a.beta2 = o_.beta2;
  a.eps = o_.eps;
  a.weight_decay = o_.weight_decay;
  a.decoupled = decoupled_;
  a.bias_correction1 = 1 - std::pow(o_.beta1, static_cast<double>(t));
  a.bias_correction2_sqrt = std::sqrt(1 - std::pow(o_.beta2, static_cast<double>(t)));
  void* m = buffer(k, 0).raw();
  void* v = buffer(k, 1).raw();
  kernels::adam_update(p.value.device(), scalar_of(p.value), p.value.numel(), p.value.raw(),
                       p.grad.raw(), m, v, a);
}

double LrSchedule::lr(std::int64_t s) const {
  TESSERA_CHECK(s >= 0, "LrSchedule: negative step " << s);
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
  double ss = 0;
  for (const NamedParameter& np : params) ss += sum_squares(np.param->grad);
  return std::sqrt(ss);
}

double clip_grad_norm(const std::vector<NamedParameter>& params, double max_norm) {
  TESSERA_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got " << max_norm);
  const double norm = grad_norm(params);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1)
    for (const NamedParameter& np : params) scale_inplace(np.param->grad, coef);
  return norm;
}

}  // namespace tessera
