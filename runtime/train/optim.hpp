#pragma once
// Optimizers with PyTorch's semantics (torch.optim.SGD, Adam, AdamW; amsgrad and
// maximize off), learning-rate schedules and gradient clipping by global norm.
//
// Parameters are replicated: after GradSync every rank holds the same full gradient,
// so every rank takes the same step on its own copy and no communication is needed
// here - not for the update, not for the global gradient norm (the norm of the
// replicated gradients is the same on every rank). Sharded parameters
// (runtime/nn/parameter_shard.hpp) are updated block by block (the update is element-wise);
// only the norm and the checkpoint state communicate, over their shard axes.
//
// Fused updates: parameters whose values and gradients lie back to back in one buffer
// (GradSync's buckets) are updated by one kernel call per bucket, with the optimizer state
// flat per bucket too; a parameter stored on its own is its own bucket. The result is the
// per-parameter update, element for element.
//
// State: exposed as named tensors ("<param>.exp_avg", "<param>.exp_avg_sq",
// "<param>.momentum_buffer", and "step") for checkpoints; load_state() takes them back.
#include "runtime/floor.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/graph.hpp"
#include "runtime/nn/state_dict.hpp"

namespace tessera {

class Optimizer {
 public:
  explicit Optimizer(std::vector<NamedParameter> params, double lr);
  virtual ~Optimizer() = default;

  // One update of every parameter from its gradient, with the current learning rate.
  void step();
  void zero_grad() const;
  double lr() const { return lr_; }
  void set_lr(double lr);  // a finite number >= 0
  std::int64_t steps_taken() const { return step_; }

  // Copies of the state (host memory, global tensors), names as above; deterministic order.
  // Collective over the mesh where a parameter is sharded.
  std::vector<NamedTensor> state() const;
  // The same as entries made when used (a checkpoint writer gathers one at a time); valid
  // until the next step.
  std::vector<NamedTensor> state_entries() const;
  // Replaces the state; every tensor this optimizer has must be present with its
  // shape (dtype converted from float64/float32 as needed). Throws naming what is missing.
  void load_state(const std::vector<NamedTensor>& state);

  const std::vector<NamedParameter>& parameters() const { return params_; }
  virtual std::string name() const = 0;
  // Flat buckets the last step() updated, one kernel call each.
  int num_buckets() const { return static_cast<int>(buckets_.size()); }

 protected:
  // One fused update: n elements of one dtype and memory space, back to back.
  struct Span {
    DType type = DType::f32;
    MemSpace space = MemSpace::Host;
    Index n = 0;
    void* value = nullptr;
    const void* grad = nullptr;
    std::vector<void*> state;  // one per state_suffixes() entry
  };
  // State buffers per parameter, by suffix ("exp_avg"...).
  virtual std::vector<std::string> state_suffixes() const = 0;
  virtual void update(const Span& s, std::int64_t t) = 0;  // t: 1-based step count

  std::vector<NamedParameter> params_;
  double lr_;
  std::int64_t step_ = 0;
  // Whether the state buffers hold values of earlier steps: after a step, or loaded with a
  // positive step count or a non-zero buffer (a PyTorch state counts no steps). Where not,
  // SGD's momentum buffer starts as the gradient (PyTorch's "no buffer yet").
  bool state_started_ = false;

 private:
  struct Bucket {
    Span span;
    std::vector<Tensor> state;  // flat, one per suffix
  };
  // (Re)builds the buckets when the parameters' storage changed since the last step,
  // keeping the state's values.
  void plan();

  std::vector<std::vector<Tensor>> state_;  // [param][suffix]: views into the buckets' state
  std::vector<Bucket> buckets_;
  std::vector<const void*> planned_;  // value and grad address per parameter at plan()
};

struct SgdOptions {
  double lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};
class Sgd : public Optimizer {
 public:
  Sgd(std::vector<NamedParameter> params, const SgdOptions& o);
  std::string name() const override { return "sgd"; }

 private:
  std::vector<std::string> state_suffixes() const override;
  void update(const Span& s, std::int64_t t) override;
  SgdOptions o_;
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
};
// Adam: weight decay is L2 (added to the gradient). AdamW: decoupled (the parameter
// is multiplied by 1 - lr * weight_decay before the Adam step); PyTorch's AdamW
// default weight_decay is 1e-2, pass it explicitly.
class Adam : public Optimizer {
 public:
  Adam(std::vector<NamedParameter> params, const AdamOptions& o, bool decoupled = false);
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }

 private:
  std::vector<std::string> state_suffixes() const override;
  void update(const Span& s, std::int64_t t) override;
  AdamOptions o_;
  bool decoupled_;
};
class AdamW : public Adam {
 public:
  AdamW(std::vector<NamedParameter> params, const AdamOptions& o)
      : Adam(std::move(params), o, true) {}
};

// Learning rate at a 0-based step count (the rate the (step+1)-th update uses).
struct LrSchedule {
  enum class Kind { Constant, Warmup, Cosine, Step };
  Kind kind = Kind::Constant;
  double base_lr = 1e-3;
  std::int64_t warmup_steps = 0;  // Warmup, Cosine: linear ramp base*(s+1)/warmup for s < warmup
  std::int64_t total_steps = 0;   // Cosine: the step at which min_lr is reached
  double min_lr = 0;              // Cosine
  std::int64_t step_size = 1;     // Step: lr = base * gamma^floor(s / step_size)
  double gamma = 0.1;             // Step
  // Cosine after warm-up: min + (base - min) * (1 + cos(pi * p)) / 2 with
  // p = min(1, (s - warmup) / max(1, total - warmup)).
  double lr(std::int64_t step) const;
};

// Scales all gradients by min(1, max_norm / (norm + 1e-6)) (torch.nn.utils.
// clip_grad_norm_) and returns the global L2 norm of the gradients before clipping.
// No communication for replicated gradients (see above); one all-reduce of a partial sum
// per set of shard axes where parameters are sharded (collective then). One pass per flat
// bucket of gradients (flat_runs.hpp).
double clip_grad_norm(const std::vector<NamedParameter>& params, double max_norm);
double grad_norm(const std::vector<NamedParameter>& params);

}  // namespace tessera
