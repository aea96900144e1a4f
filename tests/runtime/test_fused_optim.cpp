// Optimizers over GradSync's flat buckets: one fused update per bucket equals the
// per-parameter update of the same parameters stored one by one, in float64, for SGD
// (momentum, nesterov, weight decay), Adam and AdamW, with and without global-norm
// clipping; the flat state saves per parameter and loads back into a fresh model.
#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/train/optim.hpp"
#include "tests/harness/mpi_test.hpp"

using namespace tessera;

namespace {

const std::vector<std::vector<Index>> kShapes = {{3, 4}, {5}, {2, 3, 3}, {7}, {1}, {4, 4}, {6}};

struct Model {
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<NamedParameter> named;
  std::vector<Parameter*> ptrs;
  Model() {
    std::mt19937 rng(17);
    std::uniform_real_distribution<double> u(-1, 1);
    for (std::size_t k = 0; k < kShapes.size(); ++k) {
      auto p = std::make_unique<Parameter>();
      p->name = "weight";
      p->value = Tensor::empty(kShapes[k], DType::f64);
      p->grad = Tensor::zeros(kShapes[k], DType::f64);
      for (Index i = 0; i < p->value.numel(); ++i) p->value.data<double>()[i] = u(rng);
      named.push_back({"layer" + std::to_string(k) + ".weight", p.get()});
      ptrs.push_back(p.get());
      owned.push_back(std::move(p));
    }
  }
  void set_grads(int step) const {
    for (std::size_t k = 0; k < ptrs.size(); ++k)
      for (Index i = 0; i < ptrs[k]->grad.numel(); ++i)
        ptrs[k]->grad.data<double>()[i] =
            std::sin(0.7 * static_cast<double>(i) + 1.3 * static_cast<double>(k) + step) * 2.5;
  }
};

using MakeOpt = std::function<std::unique_ptr<Optimizer>(const std::vector<NamedParameter>&)>;

// Worst |a - b| / max(1, |b|) over all values, or over all state entries.
double value_diff(const Model& a, const Model& b) {
  double w = 0;
  for (std::size_t k = 0; k < a.ptrs.size(); ++k)
    for (Index i = 0; i < a.ptrs[k]->value.numel(); ++i) {
      const double x = a.ptrs[k]->value.data<double>()[i], y = b.ptrs[k]->value.data<double>()[i];
      w = std::max(w, std::abs(x - y) / std::max(1.0, std::abs(y)));
    }
  return w;
}
double state_diff(const Optimizer& a, const Optimizer& b) {
  const auto sa = a.state(), sb = b.state();
  if (sa.size() != sb.size()) return INFINITY;
  double w = 0;
  for (std::size_t e = 0; e < sa.size(); ++e) {
    if (sa[e].name != sb[e].name || sa[e].tensor.shape() != sb[e].tensor.shape()) return INFINITY;
    if (sa[e].tensor.dtype() != DType::f64) continue;  // "step"
    for (Index i = 0; i < sa[e].tensor.numel(); ++i) {
      const double x = sa[e].tensor.data<double>()[i], y = sb[e].tensor.data<double>()[i];
      w = std::max(w, std::abs(x - y) / std::max(1.0, std::abs(y)));
    }
  }
  return w;
}

}  // namespace

TEST_CASE("fused bucket optimizer steps equal per-parameter steps, with clipping", "[optim]") {
  const Mesh self = Mesh::line(MPI_COMM_SELF);
  std::vector<std::pair<std::string, MakeOpt>> opts = {
      {"sgd",
       [](const auto& p) {
         return std::make_unique<Sgd>(p, SgdOptions{0.1, 0, 0, 0});
       }},
      {"sgd momentum wd",
       [](const auto& p) {
         return std::make_unique<Sgd>(p, SgdOptions{0.05, 0.9, 0.1, 1e-2});
       }},
      {"sgd nesterov",
       [](const auto& p) {
         return std::make_unique<Sgd>(p, SgdOptions{0.05, 0.9, 0, 0, true});
       }},
      {"adam",
       [](const auto& p) {
         return std::make_unique<Adam>(p, AdamOptions{1e-2, 0.9, 0.99, 1e-8, 1e-3});
       }},
      {"adamw",
       [](const auto& p) {
         return std::make_unique<AdamW>(p, AdamOptions{1e-2, 0.8, 0.999, 1e-8, 1e-2});
       }},
  };
  for (const auto& [what, make] : opts)
    for (bool clip : {false, true}) {
      INFO(what << (clip ? " with clipping" : ""));
      Model ref, flat;
      GradSync sync(self, flat.ptrs, GradSyncOptions{{}, {}, 160});  // several buckets
      MPI_REQUIRE(sync.num_buckets() > 1);
      MPI_REQUIRE(sync.num_buckets() < static_cast<int>(kShapes.size()));
      auto a = make(ref.named), b = make(flat.named);
      double worst_norm = 0;
      for (int step = 0; step < 5; ++step) {
        ref.set_grads(step);
        flat.set_grads(step);
        sync.sync();
        if (clip) {
          const double na = clip_grad_norm(ref.named, 0.5), nb = clip_grad_norm(flat.named, 0.5);
          worst_norm = std::max(worst_norm, std::abs(na - nb) / na);
        }
        a->step();
        b->step();
      }
      // One update per bucket; the reference has one per parameter.
      MPI_CHECK(b->num_buckets() == sync.num_buckets());
      MPI_CHECK(a->num_buckets() == static_cast<int>(kShapes.size()));
      MPI_CHECK(worst_norm <= 1e-15);
      // Element-wise updates are the same arithmetic: bitwise without clipping; with it
      // only the norm's summation order differs.
      MPI_CHECK(value_diff(flat, ref) <= (clip ? 1e-15 : 0.0));
      MPI_CHECK(state_diff(*b, *a) <= (clip ? 1e-15 : 0.0));

      // The per-parameter state loads into a fresh flat model and continues bitwise.
      Model again;
      for (std::size_t k = 0; k < again.ptrs.size(); ++k)
        again.ptrs[k]->value.copy_from(flat.ptrs[k]->value);
      GradSync sync2(self, again.ptrs, GradSyncOptions{{}, {}, 160});
      auto c = make(again.named);
      c->load_state(b->state());
      for (Model* m : {&flat, &again}) m->set_grads(9);
      sync.sync();
      sync2.sync();
      b->step();
      c->step();
      MPI_CHECK(value_diff(again, flat) == 0.0);
      MPI_CHECK(state_diff(*c, *b) == 0.0);
    }
}
