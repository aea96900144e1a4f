#include "apps/common/builders.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>

#include "runtime/comm/mpi_error.hpp"

namespace tessera::app {

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c,
                                          std::vector<NamedParameter> params) {
  if (c.name == "sgd")
    return std::make_unique<Sgd>(
        std::move(params), SgdOptions{c.lr, c.momentum, c.dampening, c.weight_decay, c.nesterov});
  const AdamOptions o{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay};
  if (c.name == "adam") return std::make_unique<Adam>(std::move(params), o);
  if (c.name == "adamw") return std::make_unique<AdamW>(std::move(params), o);
  throw Error("config: optim.name = '" + c.name + "' is not one of sgd, adam, adamw");
}

LrSchedule make_schedule(const TrainConfig& c, std::int64_t total_steps) {
  LrSchedule s;
  const std::string& t = c.schedule.type;
  s.kind = t == "warmup"   ? LrSchedule::Kind::Warmup
           : t == "cosine" ? LrSchedule::Kind::Cosine
           : t == "step"   ? LrSchedule::Kind::Step
                           : LrSchedule::Kind::Constant;
  TESSERA_CHECK(
      t == "constant" || s.kind != LrSchedule::Kind::Constant,
      "config: schedule.type = '" << t << "' is not one of constant, warmup, cosine, step");
  s.base_lr = c.optim.lr;
  s.warmup_steps = c.schedule.warmup_steps;
  s.total_steps = total_steps;
  s.min_lr = c.schedule.min_lr;
  s.step_size = c.schedule.step_size;
  s.gamma = c.schedule.gamma;
  TESSERA_CHECK(
      s.kind != LrSchedule::Kind::Cosine || c.schedule.min_lr <= c.optim.lr,
      "config: schedule.min_lr = " << c.schedule.min_lr << " exceeds optim.lr = " << c.optim.lr);
  return s;
}

LossKind loss_kind(const TrainLoopConfig& c) {
  if (c.loss == "mse") return LossKind::Mse;
  if (c.loss == "rel_l2") return LossKind::RelativeL2;
  throw Error("config: train.loss = '" + c.loss + "' is not one of mse, rel_l2");
}

DType model_dtype(const ModelConfig& c) {
  TESSERA_CHECK(c.dtype == "float32" || c.dtype == "float64",
                "config: model.dtype = '" << c.dtype << "' is not one of float32, float64");
  return c.dtype == "float64" ? DType::f64 : DType::f32;
}

MemSpace model_space(int device) {
  return device < 0 ? MemSpace::Host : MemSpace::Cuda;
}

std::string signature_difference(const std::string& have, const std::string& want) {
  // Words split at spaces outside parentheses ("positions=learned:(8, 8)" is one word).
  const auto words = [](const std::string& s) {
    std::vector<std::string> w(1);
    int depth = 0;
    for (char ch : s) {
      depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
      if (ch == ' ' && depth <= 0) {
        if (!w.back().empty()) w.emplace_back();
      } else {
        w.back() += ch;
      }
    }
    if (w.back().empty()) w.pop_back();
    return w;
  };
  const std::vector<std::string> a = words(have), b = words(want);
  if (a.empty() || b.empty() || a[0] != b[0])
    return "a " + (a.empty() ? std::string("?") : a[0]) + ", not a " +
           (b.empty() ? std::string("?") : b[0]);
  // Compared by key (the text before '='), so one missing word does not shift the rest.
  const auto key = [](const std::string& w) { return w.substr(0, w.find('=')); };
  const auto find = [&](const std::vector<std::string>& v, const std::string& k) {
    for (std::size_t i = 1; i < v.size(); ++i)
      if (key(v[i]) == k) return v[i];
    // A word one side lacks: the default it stands for (written only where not the default).
    if (k == "padding") return std::string("padding=zeros");
    if (k == "positions") return std::string("positions=sinusoidal");
    return "no " + k;
  };
  std::vector<std::string> keys;
  for (const auto* v : {&a, &b})
    for (std::size_t i = 1; i < v->size(); ++i)
      if (std::find(keys.begin(), keys.end(), key((*v)[i])) == keys.end())
        keys.push_back(key((*v)[i]));
  std::string out;
  for (const std::string& k : keys) {
    const std::string x = find(a, k), y = find(b, k);
    if (x != y) out += (out.empty() ? "" : "; ") + x + ", not " + y;
  }
  return out.empty() ? "the same words" : out;
}

}  // namespace tessera::app
