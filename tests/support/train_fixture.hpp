#pragma once
// A small training fixture shared by the end-to-end training tests: a generated dataset of
// (1, 16, 16) fields whose target needs neighbourhood information, a float64 config, and
// comparisons of loss curves and parameters.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "apps/common/trainer.hpp"
#include "io/checkpoint.hpp"
#include "io/file.hpp"
#include "io/schema.hpp"
#include "io/transfer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_tensor.hpp"

namespace tessera::test {

using app::TrainConfig;
using app::Trainer;

// A folder of its own per test binary (tag) and rank count: ctest runs them concurrently.
inline std::string test_dir(const std::string& tag = "train") {
  const char* t = std::getenv("TESSERA_TEST_TMPDIR");
  std::string d =
      std::string(t ? t : "/tmp") + "/" + tag + "-np" + std::to_string(test::world_size());
  if (test::world_rank() == 0) std::filesystem::create_directories(d);
  MPI_Barrier(MPI_COMM_WORLD);
  return d;
}

// N samples of a (1, 16, 16) random field a and u = a smoothed target (a 3x3 box mean of
// a plus a^2), float32, written by rank 0.
inline std::string make_dataset(const std::string& dir, Index n = 12, unsigned seed = 42) {
  const std::string path = dir + "/data.h5";
  io::File f = io::File::create(path, MPI_COMM_WORLD);
  io::schema::write_root(f, "test_train");
  const std::vector<Index> shape = {n, 1, 16, 16};
  Tensor a = Tensor::empty(shape, DType::f32), u = Tensor::empty(shape, DType::f32);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.5, 1.0);
  for (Index i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(g(rng));
  for (Index s = 0; s < n; ++s)
    for (Index y = 0; y < 16; ++y)
      for (Index x = 0; x < 16; ++x) {
        double m = 0;
        for (Index dy = -1; dy <= 1; ++dy)
          for (Index dx = -1; dx <= 1; ++dx) {
            const Index yy = y + dy, xx = x + dx;
            if (yy >= 0 && yy < 16 && xx >= 0 && xx < 16) m += a.at<float>({s, 0, yy, xx});
          }
        const double v = a.at<float>({s, 0, y, x});
        u.at<float>({s, 0, y, x}) = static_cast<float>(m / 9 + 0.3 * v * v + 2.0);
      }
  const std::vector<Index> zero(4, 0);
  const Box mine = test::world_rank() == 0 ? Box::from_shape(shape) : Box(zero, zero);
  for (const auto& [name, t] : {std::pair{"a", a}, std::pair{"u", u}}) {
    const std::string dset = std::string("/fields/") + name;
    f.create_dataset(dset, shape, DType::f32);
    io::schema::GridMeta m;  // the schema's attributes (the apps refuse files without them)
    m.variables = {name};
    m.spacing = {1.0 / 17, 1.0 / 17};
    m.extent = {1.0, 1.0};
    io::schema::write_grid_meta(f, dset, m);
    io::write_box(f, dset, mine, t, mine);
  }
  f.close();
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

inline TrainConfig config(const std::string& data, const std::string& ckdir,
                          const std::vector<std::string>& extra = {}) {
  const std::string text = R"(
[data]
path = ")" + data + R"("
inputs = ["a"]
targets = ["u"]
[model]
width = 4
depth = 2
groups = 2
dtype = "float64"
[optim]
name = "adamw"
lr = 0.01
weight_decay = 0.01
grad_clip = 1.0
[schedule]
type = "cosine"
warmup_steps = 3
min_lr = 0.001
[train]
steps = 20
batch_size = 4
validation_split = 0.25
seed = 7
checkpoint_dir = ")" + ckdir +
                           R"("
)";
  return app::parse_config(text, extra, "test.toml");
}

inline std::vector<double> losses(Trainer& t, int steps) {
  std::vector<double> l;
  for (int i = 0; i < steps; ++i) l.push_back(t.step().loss);
  return l;
}

inline double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]) / std::max(1e-300, std::abs(b[i])));
  return a.size() == b.size() ? m : 1e300;
}

inline double param_diff(Trainer& a, Trainer& b) {
  // Global values (sharded parameters gathered): trainers of different weight layouts compare.
  const auto pa = parameter_state(a.model().graph()), pb = parameter_state(b.model().graph());
  double num = 0, den = 1e-300;
  for (std::size_t k = 0; k < pa.size(); ++k)
    for (Index i = 0; i < pa[k].tensor.numel(); ++i) {
      const double x = pa[k].tensor.data<double>()[i], y = pb[k].tensor.data<double>()[i];
      num = std::max(num, std::abs(x - y));
      den = std::max(den, std::abs(y));
    }
  return num / den;
}

// The memory estimate a Trainer checks the node against bounds what its set-up and two
// steps (and a validation) allocate, and is not far above it: measured from the allocator's
// peak on every rank (each rank's figure is the busiest rank's estimate).
inline void check_memory_estimate(const Mesh& mesh, const TrainConfig& cfg) {
  reset_peak_memory(MemSpace::Host);
  const auto before = static_cast<double>(memory_stats(MemSpace::Host).current);
  Trainer t(mesh, cfg);
  losses(t, 2);
  t.validate();
  const double used = static_cast<double>(memory_stats(MemSpace::Host).peak) - before;
  const double est = t.memory_estimate().total();
  INFO(cfg.model.type << " on " << mesh.str() << ": estimate " << app::describe(t.memory_estimate())
                      << ", measured peak " << used / (1 << 20) << " MiB");
  MPI_CHECK(used <= 1.1 * est);
  MPI_CHECK(est <= 1.6 * used);
}

// A forward without gradients (evaluation, inference) gives the training forward's output
// bit for bit, holds less at its peak (each op drops what it saved as soon as it has run),
// and leaves nothing for backward, which refuses. `shape`: the global input (N, C, ...).
inline void check_forward_without_grad(const Mesh& mesh, const TrainConfig& cfg,
                                       const std::vector<Index>& shape) {
  Trainer t(mesh, cfg);
  Model& m = t.model();
  const int nd = static_cast<int>(shape.size()) - 2;
  const ShardSpec spec(shape, app::GridLayout::of(mesh, nd).dims(nd, false), mesh);
  const ShardTensor x = ShardTensor::unchecked(
      mesh, spec, random_tensor(spec.local_shape(mesh.coords()), DType::f64, 11, 0.0, 1.0));
  m.train(false);
  const auto growth = [&](bool grad) {
    m.graph().set_grad_enabled(grad);
    reset_peak_memory(MemSpace::Host);
    const auto before = static_cast<double>(memory_stats(MemSpace::Host).current);
    ShardTensor y = m.forward(x);
    return std::pair{y, static_cast<double>(memory_stats(MemSpace::Host).peak) - before};
  };
  const auto [y_eval, eval_peak] = growth(false);
  MPI_CHECK_ERROR(m.graph().backward(y_eval), "the last forward ran without gradients");
  const auto [y_train, train_peak] = growth(true);
  INFO(cfg.model.type << " on " << mesh.str() << ": forward peak " << train_peak / (1 << 20)
                      << " MiB with gradients, " << eval_peak / (1 << 20) << " MiB without");
  MPI_CHECK(y_eval.local().shape() == y_train.local().shape());
  bool same = true;
  for (Index i = 0; i < y_eval.local().numel(); ++i)
    same = same && y_eval.local().data<double>()[i] == y_train.local().data<double>()[i];
  MPI_CHECK(same);
  MPI_CHECK(eval_peak < 0.8 * train_peak);
  m.graph().backward(y_train);  // with gradients it runs
}

// The first `steps` of a training on rank 0 alone, saved as checkpoint `steps` in ckdir; the
// losses on every rank.
inline std::vector<double> first_steps_on_rank0(const TrainConfig& cfg, const std::string& ckdir,
                                                int steps) {
  MPI_Comm solo;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() == 0 ? 0 : MPI_UNDEFINED, 0, &solo);
  std::vector<double> got;
  if (solo != MPI_COMM_NULL) {
    Trainer first(Mesh::line(solo), cfg);
    got = losses(first, steps);
    first.save(io::checkpoint_path(ckdir, steps));
    MPI_Comm_free(&solo);
  }
  got.resize(static_cast<std::size_t>(steps));
  MPI_Bcast(got.data(), steps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return got;
}

}  // namespace tessera::test
