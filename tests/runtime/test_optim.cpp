// Optimizers, schedules and clipping against the published update rules, written out
// here independently of the library (PyTorch's documented algorithms for SGD, Adam and
// AdamW), in float64; a few steps worked by hand; state save/load; float32.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>

#include "runtime/train/optim.hpp"

using namespace tessera;

namespace {

struct Holder {
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<NamedParameter> named;
  Holder(const std::vector<std::vector<double>>& values, DType dt = DType::f64) {
    for (std::size_t k = 0; k < values.size(); ++k) {
      auto p = std::make_unique<Parameter>();
      p->name = "w";
      const auto n = static_cast<Index>(values[k].size());
      p->value = Tensor::empty({n}, dt);
      p->grad = Tensor::zeros({n}, dt);
      for (Index i = 0; i < n; ++i) set(p->value, i, values[k][static_cast<std::size_t>(i)]);
      named.push_back({"layer" + std::to_string(k) + ".w", p.get()});
      owned.push_back(std::move(p));
    }
  }
  static void set(const Tensor& t, Index i, double v) {
    if (t.dtype() == DType::f64)
      t.data<double>()[i] = v;
    else
      t.data<float>()[i] = static_cast<float>(v);
  }
  static double get(const Tensor& t, Index i) {
    return t.dtype() == DType::f64 ? t.data<double>()[i] : t.data<float>()[i];
  }
  void set_grads(int step) {
    for (std::size_t k = 0; k < owned.size(); ++k)
      for (Index i = 0; i < owned[k]->grad.numel(); ++i)
        set(owned[k]->grad, i, grad_at(k, i, step));
  }
  static double grad_at(std::size_t k, Index i, int step) {
    return std::sin(1.0 + static_cast<double>(k) * 0.7 + static_cast<double>(i) * 1.3 +
                    step * 0.37);
  }
};

const std::vector<std::vector<double>> kInit = {{0.5, -1.25, 2.0}, {0.1, 0.0, -0.3, 1.5}};

// Reference: PyTorch's documented algorithms, one parameter element at a time.
struct RefSgd {
  double lr, mu, tau, wd;
  bool nesterov;
  std::vector<double> theta, b;
  void step(int t, const std::vector<double>& g_in) {
    for (std::size_t i = 0; i < theta.size(); ++i) {
      double g = g_in[i] + wd * theta[i];
      if (mu != 0) {
        b[i] = t > 1 ? mu * b[i] + (1 - tau) * g : g;
        g = nesterov ? g + mu * b[i] : b[i];
      }
      theta[i] -= lr * g;
    }
  }
};
struct RefAdam {
  double lr, b1, b2, eps, wd;
  bool adamw;
  std::vector<double> theta, m, v;
  void step(int t, const std::vector<double>& g_in) {
    for (std::size_t i = 0; i < theta.size(); ++i) {
      double g = g_in[i];
      if (adamw)
        theta[i] -= lr * wd * theta[i];
      else
        g += wd * theta[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      theta[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

std::vector<double> grads_of(std::size_t k, std::size_t n, int step) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = Holder::grad_at(k, static_cast<Index>(i), step);
  return g;
}

double max_rel(const Tensor& t, const std::vector<double>& ref) {
  double m = 0;
  for (Index i = 0; i < t.numel(); ++i) {
    const double r = ref[static_cast<std::size_t>(i)];
    m = std::max(m, std::abs(Holder::get(t, i) - r) / std::max(1.0, std::abs(r)));
  }
  return m;
}

// Runs `steps` steps of opt and of per-parameter references built by make_ref(k).
template <class Ref, class MakeRef>
double compare(Optimizer& opt, Holder& h, int steps, MakeRef make_ref,
               const std::vector<double>& lrs = {}) {
  std::vector<Ref> refs;
  for (std::size_t k = 0; k < h.owned.size(); ++k) refs.push_back(make_ref(k));
  double worst = 0;
  for (int s = 1; s <= steps; ++s) {
    h.set_grads(s);
    if (!lrs.empty()) {
      opt.set_lr(lrs[static_cast<std::size_t>(s - 1)]);
      for (auto& r : refs) r.lr = lrs[static_cast<std::size_t>(s - 1)];
    }
    opt.step();
    for (std::size_t k = 0; k < refs.size(); ++k) {
      refs[k].step(s, grads_of(k, refs[k].theta.size(), s));
      worst = std::max(worst, max_rel(h.owned[k]->value, refs[k].theta));
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("SGD with momentum, dampening, nesterov and weight decay follows PyTorch", "[optim]") {
  struct Case {
    double mu, tau, wd;
    bool nesterov;
  };
  for (const Case c : {Case{0, 0, 0, false}, Case{0.9, 0, 0, false}, Case{0.9, 0.1, 0.01, false},
                       Case{0.8, 0, 0.05, true}, Case{0, 0, 0.1, false}}) {
    Holder h(kInit);
    Sgd opt(h.named, SgdOptions{0.05, c.mu, c.tau, c.wd, c.nesterov});
    const double worst = compare<RefSgd>(opt, h, 6, [&](std::size_t k) {
      const auto n = kInit[k].size();
      return RefSgd{0.05, c.mu, c.tau, c.wd, c.nesterov, kInit[k], std::vector<double>(n, 0.0)};
    });
    INFO("momentum " << c.mu << " dampening " << c.tau << " wd " << c.wd << " nesterov "
                     << c.nesterov);
    CHECK(worst < 1e-14);
  }
}

TEST_CASE("Adam (L2 decay) and AdamW (decoupled decay) follow PyTorch, with a changing lr",
          "[optim]") {
  for (bool adamw : {false, true})
    for (double wd : {0.0, 0.01, 0.1}) {
      Holder h(kInit);
      const AdamOptions o{1e-2, 0.9, 0.999, 1e-8, wd};
      std::unique_ptr<Optimizer> opt = adamw ? std::unique_ptr<Optimizer>(new AdamW(h.named, o))
                                             : std::unique_ptr<Optimizer>(new Adam(h.named, o));
      const std::vector<double> lrs = {1e-2, 2e-2, 3e-2, 3e-2, 1e-2, 5e-3, 5e-3, 1e-3};
      const double worst = compare<RefAdam>(
          *opt, h, 8,
          [&](std::size_t k) {
            const auto n = kInit[k].size();
            return RefAdam{o.lr,
                           o.beta1,
                           o.beta2,
                           o.eps,
                           wd,
                           adamw,
                           kInit[k],
                           std::vector<double>(n, 0.0),
                           std::vector<double>(n, 0.0)};
          },
          lrs);
      INFO((adamw ? "adamw" : "adam") << " wd " << wd);
      CHECK(worst < 1e-13);
      CHECK(opt->steps_taken() == 8);
      CHECK(opt->name() == (adamw ? "adamw" : "adam"));
    }
}

TEST_CASE("a few steps worked by hand", "[optim]") {
  // SGD lr 0.1, momentum 0.9, theta0 = 1, g = 0.5 every step:
  //   b1 = 0.5, theta1 = 0.95; b2 = 0.9*0.5 + 0.5 = 0.95, theta2 = 0.95 - 0.095 = 0.855.
  // Nesterov: g1' = 0.5 + 0.9*0.5 = 0.95, theta1 = 0.905;
  //   b2 = 0.95, g2' = 0.5 + 0.9*0.95 = 1.355, theta2 = 0.905 - 0.1355 = 0.7695.
  for (bool nesterov : {false, true}) {
    Holder h(std::vector<std::vector<double>>{{1.0}});
    Sgd opt(h.named, SgdOptions{0.1, 0.9, 0, 0, nesterov});
    h.owned[0]->grad.data<double>()[0] = 0.5;
    opt.step();
    CHECK(h.owned[0]->value.data<double>()[0] == Approx(nesterov ? 0.905 : 0.95).epsilon(1e-15));
    opt.step();
    CHECK(h.owned[0]->value.data<double>()[0] == Approx(nesterov ? 0.7695 : 0.855).epsilon(1e-15));
  }
  // Adam's first step is lr * g / (|g| + eps) after bias correction: m^ = g, v^ = g^2.
  // AdamW with wd 0.5, lr 0.1 first shrinks theta by 1 - 0.05.
  Holder h(std::vector<std::vector<double>>{{2.0}});
  AdamW opt(h.named, AdamOptions{0.1, 0.9, 0.999, 1e-8, 0.5});
  h.owned[0]->grad.data<double>()[0] = -0.25;
  opt.step();
  CHECK(h.owned[0]->value.data<double>()[0] ==
        Approx(2.0 * 0.95 + 0.1 * 0.25 / (0.25 + 1e-8)).epsilon(1e-15));
  // Second step, g = 0.5: m = 0.9*0.1*(-0.25)... written out from the definitions.
  const double m1 = 0.1 * -0.25, v1 = 0.001 * 0.0625;
  const double m2 = 0.9 * m1 + 0.1 * 0.5, v2 = 0.999 * v1 + 0.001 * 0.25;
  const double theta1 = h.owned[0]->value.data<double>()[0];
  h.owned[0]->grad.data<double>()[0] = 0.5;
  opt.step();
  const double want =
      theta1 * 0.95 - 0.1 * (m2 / (1 - 0.81)) / (std::sqrt(v2 / (1 - 0.998001)) + 1e-8);
  CHECK(h.owned[0]->value.data<double>()[0] == Approx(want).epsilon(1e-14));
}

TEST_CASE("float32 parameters follow the float64 reference to float32 precision", "[optim]") {
  Holder h(kInit, DType::f32);
  Adam opt(h.named, AdamOptions{1e-2, 0.9, 0.999, 1e-8, 0.01});
  const double worst = compare<RefAdam>(opt, h, 5, [&](std::size_t k) {
    const auto n = kInit[k].size();
    return RefAdam{1e-2,
                   0.9,
                   0.999,
                   1e-8,
                   0.01,
                   false,
                   kInit[k],
                   std::vector<double>(n, 0.0),
                   std::vector<double>(n, 0.0)};
  });
  CHECK(worst < 1e-5);
}

TEST_CASE("optimizer state round-trips: 2 + load + 2 steps equal 4 steps bitwise", "[optim]") {
  for (int which = 0; which < 3; ++which) {
    auto make = [&](Holder& h) -> std::unique_ptr<Optimizer> {
      if (which == 0) return std::make_unique<Sgd>(h.named, SgdOptions{0.05, 0.9, 0, 0.01, true});
      if (which == 1)
        return std::make_unique<Adam>(h.named, AdamOptions{1e-2, 0.9, 0.99, 1e-8, 0.01});
      return std::make_unique<AdamW>(h.named, AdamOptions{1e-2, 0.8, 0.999, 1e-6, 0.05});
    };
    Holder straight(kInit), resumed(kInit);
    auto a = make(straight);
    for (int s = 1; s <= 4; ++s) straight.set_grads(s), a->step();

    auto b = make(resumed);
    for (int s = 1; s <= 2; ++s) resumed.set_grads(s), b->step();
    const auto saved = b->state();
    std::vector<std::vector<double>> values;
    for (auto& p : resumed.owned) {
      values.emplace_back();
      for (Index i = 0; i < p->value.numel(); ++i)
        values.back().push_back(p->value.data<double>()[i]);
    }
    Holder fresh(values);  // parameters as a checkpoint would restore them
    auto c = make(fresh);
    c->load_state(saved);
    CHECK(c->steps_taken() == 2);
    for (int s = 3; s <= 4; ++s) fresh.set_grads(s), c->step();
    for (std::size_t k = 0; k < fresh.owned.size(); ++k)
      for (Index i = 0; i < fresh.owned[k]->value.numel(); ++i)
        CHECK(fresh.owned[k]->value.data<double>()[i] ==
              straight.owned[k]->value.data<double>()[i]);

    // Names say what each tensor is.
    std::vector<std::string> names;
    for (const auto& t : saved) names.push_back(t.name);
    CHECK(names.front() == "step");
    if (which == 0) CHECK(names[1] == "layer0.w.momentum_buffer");
    if (which > 0) CHECK((names[1] == "layer0.w.exp_avg" && names[2] == "layer0.w.exp_avg_sq"));

    // Missing and misshapen entries are named.
    auto missing = saved;
    missing.pop_back();
    try {
      c->load_state(missing);
      FAIL("no error for a missing entry");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("no entry 'layer1.w."));
    }
    auto bad = saved;
    bad.back().tensor = Tensor::zeros({7}, DType::f64);
    CHECK_THROWS_WITH(c->load_state(bad), Catch::Contains("has shape (7)"));
  }
}

TEST_CASE("SGD's momentum buffer starts where none exists, as PyTorch's", "[optim]") {
  // lr 0.1, momentum 0.9, dampening 0.5, theta0 = 1, g = 0.5 (by hand).
  const SgdOptions o{0.1, 0.9, 0.5, 0, false};
  auto one_step = [&](const std::vector<NamedTensor>* state) {
    Holder h(std::vector<std::vector<double>>{{1.0}});
    Sgd opt(h.named, o);
    if (state) opt.load_state(*state);
    h.owned[0]->grad.data<double>()[0] = 0.5;
    opt.step();
    return h.owned[0]->value.data<double>()[0];
  };
  auto state_of = [](std::int64_t steps, double buffer) {
    Tensor step = Tensor::empty({1}, DType::i64);
    step.data<std::int64_t>()[0] = steps;
    Tensor buf = Tensor::empty({1}, DType::f64);
    buf.data<double>()[0] = buffer;
    return std::vector<NamedTensor>{{"step", step}, {"layer0.w.momentum_buffer", buf}};
  };
  // Fresh: the buffer becomes the gradient (no dampening on the first step): 1 - 0.05.
  CHECK(one_step(nullptr) == Approx(0.95).epsilon(1e-15));
  // A state saved before any step (step 0, zero buffer) starts alike.
  const auto never = state_of(0, 0.0);
  CHECK(one_step(&never) == Approx(0.95).epsilon(1e-15));
  // A buffer from elsewhere at step 0 (PyTorch counts no SGD steps) is used, not dropped:
  // b = 0.9 * 2 + 0.5 * 0.5 = 2.05, theta = 1 - 0.205.
  const auto imported = state_of(0, 2.0);
  CHECK(one_step(&imported) == Approx(0.795).epsilon(1e-15));
  // A zero buffer after steps is a buffer: b = 0 + 0.25, theta = 1 - 0.025.
  const auto zeroed = state_of(3, 0.0);
  CHECK(one_step(&zeroed) == Approx(0.975).epsilon(1e-15));
}

TEST_CASE("float64 state loads into float32 parameters", "[optim]") {
  Holder h64(kInit), h32(kInit, DType::f32);
  Adam a(h64.named, AdamOptions{});
  h64.set_grads(1);
  a.step();
  Adam b(h32.named, AdamOptions{});
  b.load_state(a.state());
  CHECK(b.state()[1].tensor.dtype() == DType::f32);
  CHECK(b.state()[1].tensor.data<float>()[2] ==
        static_cast<float>(a.state()[1].tensor.data<double>()[2]));
}

TEST_CASE("learning-rate schedules by hand", "[optim]") {
  LrSchedule c;
  c.base_lr = 0.5;
  CHECK(c.lr(0) == 0.5);
  CHECK(c.lr(1000) == 0.5);

  LrSchedule w;
  w.kind = LrSchedule::Kind::Warmup;
  w.base_lr = 1.0;
  w.warmup_steps = 4;
  const double want_w[] = {0.25, 0.5, 0.75, 1.0, 1.0, 1.0};
  for (int s = 0; s < 6; ++s) CHECK(w.lr(s) == want_w[s]);

  LrSchedule cos;
  cos.kind = LrSchedule::Kind::Cosine;
  cos.base_lr = 1.0;
  cos.min_lr = 0.1;
  cos.warmup_steps = 2;
  cos.total_steps = 10;
  CHECK(cos.lr(0) == 0.5);
  CHECK(cos.lr(1) == 1.0);
  CHECK(cos.lr(2) == Approx(1.0).epsilon(1e-15));
  CHECK(cos.lr(6) == Approx(0.55).epsilon(1e-15));  // halfway: min + (base - min) / 2
  CHECK(cos.lr(4) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4))).epsilon(1e-15));
  CHECK(cos.lr(10) == Approx(0.1).epsilon(1e-15));
  CHECK(cos.lr(50) == Approx(0.1).epsilon(1e-15));

  LrSchedule st;
  st.kind = LrSchedule::Kind::Step;
  st.base_lr = 1.0;
  st.step_size = 3;
  st.gamma = 0.5;
  const double want_s[] = {1, 1, 1, 0.5, 0.5, 0.5, 0.25};
  for (int s = 0; s < 7; ++s) CHECK(st.lr(s) == want_s[s]);
  CHECK_THROWS_WITH(st.lr(-1), Catch::Contains("negative step"));
  // Negative rates are refused at the first step, not when the optimizer meets one.
  st.gamma = -1;
  CHECK_THROWS_WITH(st.lr(0), Catch::Contains("step gamma must be finite and >= 0, not -1"));
  LrSchedule negative_floor;
  negative_floor.kind = LrSchedule::Kind::Cosine;
  negative_floor.total_steps = 10;
  negative_floor.min_lr = -0.5;
  CHECK_THROWS_WITH(negative_floor.lr(0),
                    Catch::Contains("cosine min_lr must be finite and >= 0, not -0.5"));
}

TEST_CASE("gradient clipping by global norm", "[optim]") {
  for (DType dt : {DType::f64, DType::f32}) {
    Holder h(std::vector<std::vector<double>>{{0, 0}, {0}}, dt);
    Holder::set(h.owned[0]->grad, 0, 3), Holder::set(h.owned[0]->grad, 1, 4);
    Holder::set(h.owned[1]->grad, 0, 12);
    // Global norm sqrt(9 + 16 + 144) = 13 over both parameters.
    CHECK(grad_norm(h.named) == 13.0);
    CHECK(clip_grad_norm(h.named, 100.0) == 13.0);
    CHECK(Holder::get(h.owned[1]->grad, 0) == 12.0);  // untouched below the limit
    CHECK(clip_grad_norm(h.named, 6.5) == 13.0);
    const double coef = 6.5 / (13.0 + 1e-6);
    const double tol = dt == DType::f64 ? 1e-15 : 1e-6;
    CHECK(Holder::get(h.owned[0]->grad, 0) == Approx(3 * coef).epsilon(tol));
    CHECK(Holder::get(h.owned[0]->grad, 1) == Approx(4 * coef).epsilon(tol));
    CHECK(Holder::get(h.owned[1]->grad, 0) == Approx(12 * coef).epsilon(tol));
    CHECK(grad_norm(h.named) == Approx(6.5).epsilon(1e-6));
  }
  Holder h(std::vector<std::vector<double>>{{1.0}});
  CHECK_THROWS_WITH(clip_grad_norm(h.named, 0), Catch::Contains("max_norm must be > 0"));
}

TEST_CASE("optimizer option errors", "[optim]") {
  Holder h(kInit);
  CHECK_THROWS_WITH(Sgd(h.named, SgdOptions{0.1, 0, 0, 0, true}),
                    Catch::Contains("nesterov needs momentum"));
  CHECK_THROWS_WITH(Adam(h.named, AdamOptions{0.1, 1.0}), Catch::Contains("betas"));
  Parameter nograd{"x", Tensor::zeros({2}, DType::f64), Tensor()};
  CHECK_THROWS_WITH(Adam({{"x", &nograd}}, AdamOptions{}), Catch::Contains("'x' has no gradient"));
  CHECK_THROWS_WITH(Adam(h.named, AdamOptions{std::nan("")}),
                    Catch::Contains("learning rate nan is not a finite number >= 0"));
  CHECK_THROWS_WITH(Sgd(h.named, SgdOptions{-0.1}), Catch::Contains("learning rate -0.1"));
  Adam ok(h.named, AdamOptions{});
  CHECK_THROWS_WITH(ok.set_lr(INFINITY), Catch::Contains("learning rate inf"));
  std::vector<NamedParameter> twice = h.named;
  twice.push_back({"again", h.named.front().param});
  CHECK_THROWS_WITH(Adam(twice, AdamOptions{}),
                    Catch::Contains("is listed twice (also as '" + h.named.front().name + "')"));
  // Values that made every parameter NaN, or state entries that two parameters shared.
  CHECK_THROWS_WITH(Adam(h.named, AdamOptions{0.1, 0.9, 0.999, 1e-8, INFINITY}),
                    Catch::Contains("must be finite and >= 0, not 0.1, 1e-08, inf"));
  CHECK_THROWS_WITH(Sgd(h.named, SgdOptions{0.1, 0.9, std::nan("")}),
                    Catch::Contains("dampening must lie in [0, 1], not nan"));
  CHECK_THROWS_WITH(Sgd(h.named, SgdOptions{0.1, 0.9, 0, INFINITY}),
                    Catch::Contains("must be finite and >= 0"));
  std::vector<NamedParameter> same_name = h.named;
  same_name[1].name = same_name[0].name;
  CHECK_THROWS_WITH(Adam(same_name, AdamOptions{}),
                    Catch::Contains("two parameters are named '" + same_name[0].name + "'"));
  std::vector<NamedTensor> st = ok.state();
  for (NamedTensor& t : st)
    if (t.name == "step") t.tensor.data<std::int64_t>()[0] = -3;
  CHECK_THROWS_WITH(ok.load_state(st), Catch::Contains("'step' is -3, a count of steps >= 0"));
}
