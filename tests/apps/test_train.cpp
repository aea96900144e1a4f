// Training end to end on a small generated dataset, float64:
//  - the loss curve (20 steps: AdamW, cosine schedule with warm-up, clipping, shuffled
//    batches, GroupNorm UNet) on the world mesh, a data-parallel mesh and a 2x2 domain x
//    data mesh equals a one-rank run to 1e-9 relative, validation too;
//  - 10 steps on one rank, checkpoint, restore at the world's rank count and mesh, 10 more
//    steps == 20 steps straight on that mesh, to 1e-12 (losses and parameters);
//  - a checkpoint write that fails midway (fault hook) leaves the previous one in place
//    and loadable, with the parameters it had;
//  - a UNet deeper than its split (domain ranks holding no cell at the coarsest level) equals
//    one rank;
//  - recompute (train.recompute) gives the same losses bit for bit, GroupNorm and BatchNorm;
//  - micro-batches (train.accumulate 2 and 4) give the whole batch's losses to 1e-9, on
//    domain and data meshes, with a smaller activation estimate that still bounds a step;
//  - configs the data cannot take fail on every rank with a message naming the problem.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>

#include "apps/common/trainer.hpp"
#include "io/file.hpp"
#include "io/schema.hpp"
#include "io/sharded.hpp"
#include "io/transfer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/train_fixture.hpp"

using namespace tessera;
using namespace tessera::app;
using namespace tessera::test;

TEST_CASE("training: the loss curve on any mesh equals one rank's", "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const TrainConfig cfg = config(data, dir + "/ck-eq");
  Trainer ref(Mesh::line(MPI_COMM_SELF), cfg);
  const std::vector<double> want = losses(ref, 20);
  const EvalResult want_val = ref.validate();
  INFO("one-rank losses: first " << want.front() << ", last " << want.back());
  MPI_CHECK(want.back() < 0.7 * want.front());  // it learns
  const int n = test::world_size();
  std::vector<std::string> meshes = {"domain=" + std::to_string(n)};
  if (4 % n == 0 && n > 1) meshes.push_back("data=" + std::to_string(n));
  if (n == 4) meshes.push_back("domain=2,data=2");
  for (const std::string& m : meshes) {
    Trainer t(Mesh::parse(MPI_COMM_WORLD, m), cfg);
    const std::vector<double> got = losses(t, 20);
    const EvalResult val = t.validate();
    INFO("mesh " << m << ": first loss " << got.front() << " vs " << want.front() << ", last "
                 << got.back() << " vs " << want.back() << ", max rel diff " << max_rel(got, want));
    MPI_CHECK(max_rel(got, want) < 1e-9);
    MPI_CHECK(std::abs(val.loss - want_val.loss) < 1e-9 * want_val.loss);
    MPI_CHECK(std::abs(val.rel_l2 - want_val.rel_l2) < 1e-9 * want_val.rel_l2);
  }
}

TEST_CASE("training: micro-batches (train.accumulate) give the whole batch's loss curve",
          "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const TrainConfig cfg = config(data, dir + "/ck-acc");  // batch 4
  Trainer ref(Mesh::line(MPI_COMM_SELF), cfg);
  const std::vector<double> want = losses(ref, 12);
  const EvalResult want_val = ref.validate();
  const int n = test::world_size();
  for (const int acc : {2, 4}) {
    std::vector<std::string> meshes = {"domain=" + std::to_string(n)};
    if (n == 2 && acc == 2) meshes.push_back("data=2");
    if (n == 4 && acc == 2) meshes.push_back("domain=2,data=2");
    for (const std::string& m : meshes) {
      Trainer t(Mesh::parse(MPI_COMM_WORLD, m),
                config(data, dir + "/ck-acc", {"train.accumulate=" + std::to_string(acc)}));
      const std::vector<double> got = losses(t, 12);
      const EvalResult val = t.validate();
      INFO("accumulate " << acc << ", mesh " << m << ": max rel diff " << max_rel(got, want));
      MPI_CHECK(max_rel(got, want) < 1e-9);
      MPI_CHECK(std::abs(val.loss - want_val.loss) < 1e-9 * want_val.loss);
      MPI_CHECK(std::abs(val.rel_l2 - want_val.rel_l2) < 1e-9 * want_val.rel_l2);
    }
  }
  // AdamW and clipping hide a gradient's scale; plain SGD shows it (a micro-batch's gradient
  // weighed wrongly, or all-reduced more than once, changes the update).
  {
    const std::vector<std::string> sgd = {"optim.name=sgd", "optim.grad_clip=0", "optim.momentum=0",
                                          "optim.lr=0.05"};
    Trainer one(Mesh::line(MPI_COMM_SELF), config(data, dir + "/ck-acc", sgd));
    const std::vector<double> w = losses(one, 8);
    std::vector<std::string> acc4 = sgd;
    acc4.push_back("train.accumulate=4");
    Trainer t(Mesh::line(MPI_COMM_WORLD), config(data, dir + "/ck-acc", acc4));
    const std::vector<double> got = losses(t, 8);
    INFO("sgd, accumulate 4: max rel diff " << max_rel(got, w) << ", first " << w.front()
                                            << ", last " << w.back());
    MPI_CHECK(w.back() < 0.95 * w.front());
    MPI_CHECK(max_rel(got, w) < 1e-9);
  }
  // A micro-batch's activations: the estimate falls with the micro-batch and still bounds
  // what a step allocates.
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const TrainConfig whole = config(data, dir + "/ck-acc", {"model.width=8"}),
                    quarter =
                        config(data, dir + "/ck-acc", {"model.width=8", "train.accumulate=4"});
  const double a1 = Trainer(mesh, whole).memory_estimate().activations,
               a4 = Trainer(mesh, quarter).memory_estimate().activations;
  INFO("activations estimated: " << a1 / (1 << 20) << " MiB whole, " << a4 / (1 << 20)
                                 << " MiB in micro-batches of one");
  MPI_CHECK(a4 < 0.4 * a1);
  check_memory_estimate(mesh, quarter);
}

TEST_CASE("training: the memory estimate bounds a step's allocations, for each grid model",
          "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const std::vector<std::vector<std::string>> models = {
      {"model.width=8"},
      {"model.type=fno", "model.width=6", "model.modes=4,3", "model.projection=8",
       "model.weights=mode_sharded"},
      {"model.type=vit", "model.patch=2", "model.dim=8", "model.heads=2"}};
  for (auto m : models) {
    check_memory_estimate(Mesh::line(MPI_COMM_WORLD), config(data, dir + "/ck-mem", m));
    m.push_back("train.recompute=true");  // the estimate follows the segments
    check_memory_estimate(Mesh::line(MPI_COMM_WORLD), config(data, dir + "/ck-mem", m));
  }
}

TEST_CASE("training: recompute gives the loss curve without it, bit for bit", "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  for (const std::string norm : {"group", "batch"}) {
    Trainer plain(mesh, config(data, dir + "/ck-rc", {"model.norm=" + norm}));
    Trainer again(mesh,
                  config(data, dir + "/ck-rc", {"model.norm=" + norm, "train.recompute=true"}));
    const std::vector<double> want = losses(plain, 6), got = losses(again, 6);
    INFO("norm " << norm << ": max rel diff " << max_rel(got, want));
    MPI_CHECK(got == want);
    MPI_CHECK(again.validate().loss == plain.validate().loss);
  }
}

// f(mesh, budget) for the meshes of the streamed-data tests at this rank count (with a 2-D
// domain mesh at 4 ranks if asked) and two scan budgets: TESSERA_IO_PIECE_BYTES = 12288 (a
// sample's blocks are 2 x 256 cells, float64 and the raw float32, 6144 bytes at one rank:
// runs of 2 samples at one rank, 4 to 8 on more, so runs, their ends and single samples all
// occur) and the default (one run of every sample).
static void for_each_mesh_and_budget(
    bool domain_2d, const std::function<void(const std::string&, const char*)>& f) {
  const int n = test::world_size();
  std::vector<std::string> meshes = {"domain=" + std::to_string(n)};
  if (n == 2) meshes.push_back("data=2");
  if (n == 4) meshes.push_back("domain=2,data=2");
  if (n == 4 && domain_2d) meshes.push_back("x=2,y=2");
  for (const char* budget : {"12288", ""}) {
    if (*budget)
      setenv("TESSERA_IO_PIECE_BYTES", budget, 1);
    else
      unsetenv("TESSERA_IO_PIECE_BYTES");
    for (const std::string& m : meshes) f(m, budget);
  }
  unsetenv("TESSERA_IO_PIECE_BYTES");
}

TEST_CASE("training: data streamed from the file gives the in-memory run bit for bit", "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  for_each_mesh_and_budget(false, [&](const std::string& m, const char* budget) {
    const Mesh mesh = Mesh::parse(MPI_COMM_WORLD, m);
    Trainer memory(mesh, config(data, dir + "/ck-stream"));
    Trainer streamed(mesh, config(data, dir + "/ck-stream", {"data.stream=true"}));
    MPI_CHECK(streamed.data().streamed());
    MPI_CHECK(!memory.data().streamed());
    const std::vector<double> want = losses(memory, 8), got = losses(streamed, 8);
    INFO("mesh " << m << ", piece budget '" << budget << "': max rel diff " << max_rel(got, want));
    MPI_CHECK(got == want);
    const EvalResult vw = memory.validate(), vg = streamed.validate();
    MPI_CHECK(vg.loss == vw.loss);
    MPI_CHECK(vg.rel_l2 == vw.rel_l2);
    // Held: a scan's run, not all 12 samples (the default budget's run holds all 12).
    if (*budget) MPI_CHECK(streamed.data().cache_bytes() < memory.data().cache_bytes());
  });
  // Resumed onto a file of other statistics (the same shapes, other values), the
  // checkpoint's normalization is taken over from the file's values in both: the cache is
  // read again, not un-normalized and normalized again (which rounds twice).
  {
    setenv("TESSERA_IO_PIECE_BYTES", "12288", 1);  // the cache read again in runs
    const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
    Trainer first(mesh, config(data, dir + "/ck-restat"));
    losses(first, 3);
    const std::string ck = dir + "/ck-restat/ckpt_00000003.h5";
    first.save(ck);
    const std::string other = make_dataset(test_dir("train-restat"), 12, 43);
    Trainer memory(mesh, config(other, dir + "/ck-restat"));
    Trainer streamed(mesh, config(other, dir + "/ck-restat", {"data.stream=true"}));
    memory.restore(io::load_checkpoint(ck, MPI_COMM_WORLD));
    streamed.restore(io::load_checkpoint(ck, MPI_COMM_WORLD));
    const std::vector<double> want = losses(memory, 4), got = losses(streamed, 4);
    INFO("after a resume onto other statistics: max rel diff " << max_rel(got, want));
    MPI_CHECK(got == want);
    MPI_CHECK(streamed.validate().loss == memory.validate().loss);
  }
  unsetenv("TESSERA_IO_PIECE_BYTES");
}

// Mean and population std of samples [0, n_train) of a field, two passes in long double over
// the whole file: the reference for the statistics merged from per-sample summaries.
static std::pair<double, double> field_moments(const std::string& path, const std::string& field,
                                               Index n_train) {
  const io::File f = io::File::open(path, MPI_COMM_SELF);
  const std::string dset = "/fields/" + field;
  std::vector<Index> hi = f.info(dset).shape;
  hi[0] = n_train;
  const Tensor t = io::read_slab(f, dset, Box(std::vector<Index>(hi.size(), 0), hi), DType::f32);
  long double sum = 0, sq = 0;
  for (Index i = 0; i < t.numel(); ++i) sum += t.data<float>()[i];
  const long double mean = sum / t.numel();
  for (Index i = 0; i < t.numel(); ++i)
    sq += (t.data<float>()[i] - mean) * (t.data<float>()[i] - mean);
  return {static_cast<double>(mean), static_cast<double>(std::sqrt(sq / t.numel()))};
}

TEST_CASE("training: the normalization from sample summaries equals a two-pass reference",
          "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir("train-stats");
  const std::string data = make_dataset(dir);
  // The fixture's split: the first 9 of 12 samples train.
  const auto [am, as] = field_moments(data, "a", 9);
  const auto [um, us] = field_moments(data, "u", 9);
  for_each_mesh_and_budget(true, [&](const std::string& m, const char* budget) {
    const Mesh mesh = Mesh::parse(MPI_COMM_WORLD, m);
    Trainer memory(mesh, config(data, dir + "/ck"));
    Trainer streamed(mesh, config(data, dir + "/ck", {"data.stream=true"}));
    // float32 values: the statistics of the same file, to the bit.
    Trainer f32(mesh, config(data, dir + "/ck", {"data.stream=true", "model.dtype=float32"}));
    for (const Trainer* t : {&memory, &streamed, &f32}) {
      INFO("mesh " << m << ", budget '" << budget << "', streamed " << t->data().streamed()
                   << ": a " << t->input_norm().mean[0] << " / " << t->input_norm().std[0] << " vs "
                   << am << " / " << as << ", u " << t->target_norm().mean[0] << " / "
                   << t->target_norm().std[0] << " vs " << um << " / " << us);
      MPI_CHECK(std::abs(t->input_norm().mean[0] - am) < 1e-14 * std::abs(am));
      MPI_CHECK(std::abs(t->input_norm().std[0] - as) < 1e-14 * as);
      MPI_CHECK(std::abs(t->target_norm().mean[0] - um) < 1e-14 * std::abs(um));
      MPI_CHECK(std::abs(t->target_norm().std[0] - us) < 1e-14 * us);
    }
    // The same bits from the cache and streamed.
    MPI_CHECK(streamed.input_norm().mean == memory.input_norm().mean);
    MPI_CHECK(streamed.input_norm().std == memory.input_norm().std);
    MPI_CHECK(streamed.target_norm().mean == memory.target_norm().mean);
    MPI_CHECK(streamed.target_norm().std == memory.target_norm().std);
    MPI_CHECK(f32.input_norm().mean == memory.input_norm().mean);
    MPI_CHECK(f32.target_norm().std == memory.target_norm().std);
  });
  // A field of one value has that mean and std 1: it normalizes to exactly 0, and the run
  // trains. (Here its sums are exact anyway; past 2^29 cells a float64 sum of its copies
  // rounds, and the equal least and greatest value still give the value itself.)
  {
    const std::string path = dir + "/const.h5";
    if (test::world_rank() == 0)
      std::filesystem::copy_file(data, path, std::filesystem::copy_options::overwrite_existing);
    MPI_Barrier(MPI_COMM_WORLD);
    {
      io::File f = io::File::open(path, MPI_COMM_WORLD, io::Mode::ReadWrite);
      const std::vector<Index> shape = {12, 1, 16, 16};
      Tensor c = Tensor::empty(shape, DType::f32);
      for (Index i = 0; i < c.numel(); ++i) c.data<float>()[i] = 0.1f;
      const std::vector<Index> zero(4, 0);
      const Box mine = test::world_rank() == 0 ? Box::from_shape(shape) : Box(zero, zero);
      io::write_box(f, "/fields/a", mine, c, mine);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (const char* stream : {"data.stream=false", "data.stream=true"}) {
      Trainer t(Mesh::line(MPI_COMM_WORLD), config(path, dir + "/ck-const", {stream}));
      INFO(stream << ": mean " << t.input_norm().mean[0] << ", std " << t.input_norm().std[0]);
      MPI_CHECK(t.input_norm().mean[0] == static_cast<double>(0.1f));
      MPI_CHECK(t.input_norm().std[0] == 1.0);
      const auto [x, y] = t.data().batch({0, 5, 11}, MemSpace::Host);
      const Tensor xs = x.gather_all();
      double most = 0;
      for (Index i = 0; i < xs.numel(); ++i) most = std::max(most, std::abs(xs.data<double>()[i]));
      MPI_CHECK(most == 0.0);
      MPI_CHECK(std::isfinite(losses(t, 2).back()));
    }
  }
}

TEST_CASE("training: a channel of one value normalizes to exactly zero", "[train]") {
  // 10^9 cells of 0.1f: a float64 sum of the copies would round off 0.1f * 10^9, and its
  // mean off 0.1f; the equal least and greatest value give the value itself.
  const double v = static_cast<double>(0.1f);
  ValueSummary one{1e9, v * (1 + 1e-15), 1e-20, v, v}, spread{8, 2.0, 32.0, -1.0, 5.0};
  const Normalizer nz = normalizer_from({one, spread});
  MPI_CHECK(nz.mean[0] == v);
  MPI_CHECK(nz.std[0] == 1.0);
  MPI_CHECK(nz.applied(0, 0.1f) == 0.0f);
  MPI_CHECK(nz.mean[1] == 2.0);
  MPI_CHECK(nz.std[1] == 2.0);  // sqrt(32 / 8)
  MPI_CHECK_ERROR(normalizer_from({ValueSummary{}}), "normalization statistics over no cells");
  // Merged: the union's moments, whatever the split.
  ValueSummary a{2, 1.0, 2.0, 0.0, 2.0}, b{1, 4.0, 0.0, 4.0, 4.0};  // {0, 2} and {4}
  a.merge(b);
  MPI_CHECK(a.count == 3);
  MPI_CHECK(std::abs(a.mean - 2.0) < 1e-15);
  MPI_CHECK(std::abs(a.m2 - 8.0) < 1e-14);  // (0-2)^2 + 0 + (4-2)^2
  MPI_CHECK(a.lo == 0.0 && a.hi == 4.0);
  ValueSummary empty;
  empty.merge(ValueSummary{});
  empty.merge(b);
  MPI_CHECK(empty.count == 1 && empty.mean == 4.0 && empty.lo == 4.0);
}

TEST_CASE("training: summaries of data far from zero merge to the two-pass std", "[train]") {
  // 3e7 + 2 x Bernoulli and 1e6 + N(0, 1) in float32 (the mean 10^7 times the spread): merged
  // from 24 samples of 250 cells in several groupings (as ranks would), mean and std equal two
  // passes in long double over every value to 1e-15 (kept as plain doubles, the means'
  // rounding put 1e-11 into the std, differently for each grouping).
  std::mt19937_64 rng(5);
  std::bernoulli_distribution coin(0.5);
  std::normal_distribution<double> g(0, 1);
  for (const double base : {3e7, 1e6}) {
    const Index n = 24, cells = 250;
    SampleSummaries sm(n, 1);
    std::vector<float> all;
    for (Index s = 0; s < n; ++s) {
      Tensor t = Tensor::empty({1, 1, cells}, DType::f32);
      for (Index c = 0; c < cells; ++c) {
        const double x = base == 3e7 ? base + 2.0 * coin(rng) : base + g(rng);
        t.data<float>()[c] = static_cast<float>(x);
        all.push_back(t.data<float>()[c]);
      }
      sm.add(s, t);
    }
    long double sum = 0, sq = 0;
    for (float x : all) sum += x;
    const long double mean = sum / static_cast<long double>(all.size());
    for (float x : all) sq += (x - mean) * (x - mean);
    const double want_mean = static_cast<double>(mean),
                 want_std = static_cast<double>(std::sqrt(sq / all.size()));
    std::vector<std::vector<Index>> groupings = {{}, {}, {}};  // one, halves, thirds
    for (Index s = 0; s < n; ++s) groupings[0].push_back(s);
    for (int parts : {2, 3}) {
      ValueSummary merged;
      for (int p = 0; p < parts; ++p) {
        std::vector<Index> mine;
        for (Index s = p * n / parts; s < (p + 1) * n / parts; ++s) mine.push_back(s);
        merged.merge(sm.over(mine, MPI_COMM_SELF)[0]);
      }
      const Normalizer nz = normalizer_from({merged});
      INFO("base " << base << ", " << parts << " groups: mean " << nz.mean[0] << " vs " << want_mean
                   << ", std " << nz.std[0] << " vs " << want_std);
      MPI_CHECK(std::abs(nz.mean[0] - want_mean) <= 1e-15 * std::abs(want_mean));
      MPI_CHECK(std::abs(nz.std[0] - want_std) <= 1e-15 * want_std);
    }
    const Normalizer one = normalizer_from(sm.over(groupings[0], MPI_COMM_SELF));
    INFO("base " << base << ", one group: std " << one.std[0] << " vs " << want_std);
    MPI_CHECK(std::abs(one.std[0] - want_std) <= 1e-15 * want_std);
  }
}

TEST_CASE("training: a streamed file cut short under the run is said to have changed", "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir("train-cut");
  const std::string data = make_dataset(dir);
  Trainer t(Mesh::line(MPI_COMM_WORLD), config(data, dir + "/ck", {"data.stream=true"}));
  losses(t, 1);
  MPI_Barrier(MPI_COMM_WORLD);
  // Cut inside the values: past the end reads as junk (here NaN, which the batch's finite
  // check meets first: the file's change must be what is said, not bad data).
  if (test::world_rank() == 0)
    std::filesystem::resize_file(data, std::filesystem::file_size(data) / 2);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_CHECK_ERROR(losses(t, 4), "changed while it was read (its size went from");
}

TEST_CASE("evaluation: a forward without gradients equals the training one and holds less",
          "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const std::vector<std::vector<std::string>> models = {
      {"model.width=8", "model.norm=batch"},
      {"model.type=fno", "model.width=6", "model.modes=4,3", "model.projection=8",
       "model.weights=mode_sharded"},
      {"model.type=vit", "model.patch=2", "model.dim=8", "model.heads=2"},
      {"model.type=vit", "model.patch=2", "model.dim=8", "model.heads=2",
       "model.attention=neighbourhood", "model.window=3"}};
  for (const auto& m : models)
    check_forward_without_grad(Mesh::line(MPI_COMM_WORLD), config(data, dir + "/ck-eval", m),
                               {4, 1, 16, 16});
}

TEST_CASE("checkpoint: 10 steps, save, restart at another rank count, 10 more == 20 straight",
          "[train][checkpoint]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const std::string ckdir = dir + "/ck-restart";
  const TrainConfig cfg = config(data, ckdir);
  const int n = test::world_size();
  const Mesh world =
      n == 4 ? Mesh::parse(MPI_COMM_WORLD, "domain=2,data=2") : Mesh::line(MPI_COMM_WORLD);
  Trainer straight(world, cfg);
  const std::vector<double> want = losses(straight, 20);

  // The first half on rank 0 alone.
  std::vector<double> got = first_steps_on_rank0(cfg, ckdir, 10);
  const std::string latest = io::latest_checkpoint(ckdir, MPI_COMM_WORLD);
  MPI_CHECK(latest == io::checkpoint_path(ckdir, 10));
  Trainer second(world, cfg);
  second.restore(io::load_checkpoint(latest, MPI_COMM_WORLD));
  MPI_CHECK(second.steps_done() == 10);
  for (double l : losses(second, 10)) got.push_back(l);
  INFO("max rel diff of the loss curves " << max_rel(got, want) << ", parameters "
                                          << param_diff(second, straight));
  MPI_CHECK(max_rel(got, want) < 1e-12);
  MPI_CHECK(param_diff(second, straight) < 1e-12);
}

TEST_CASE("checkpoint: train.epochs resumed with another batch size draws the passes left",
          "[train][checkpoint]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const std::string ckdir = dir + "/ck-epochs";
  // 9 training samples, 2 passes: 18 samples, 5 steps of 4.
  const TrainConfig four = config(data, ckdir, {"train.steps=0", "train.epochs=2"});
  {
    Trainer t(Mesh::line(MPI_COMM_WORLD), four);
    MPI_CHECK(t.total_steps() == 5);
    losses(t, 2);
    MPI_CHECK(std::abs(t.epochs_drawn() - 8.0 / 9) < 1e-15);
    t.save(io::checkpoint_path(ckdir, 2));
  }
  const TrainConfig two =
      config(data, ckdir, {"train.steps=0", "train.epochs=2", "train.batch_size=2"});
  Trainer t(Mesh::line(MPI_COMM_WORLD), two);
  t.restore(io::load_checkpoint(io::checkpoint_path(ckdir, 2), MPI_COMM_WORLD));
  // 10 samples left: 5 steps of 2 after the 2 taken.
  MPI_CHECK(t.steps_done() == 2);
  MPI_CHECK(t.total_steps() == 7);
  MPI_CHECK(std::abs(t.epochs_drawn() - 8.0 / 9) < 1e-15);
  losses(t, 3);
  t.save(io::checkpoint_path(ckdir, 5));
  losses(t, 2);
  MPI_CHECK(t.epochs_drawn() == 2.0);
  // Resumed again at batch 2 (the checkpoint's config says 2 now): 4 samples left, 2 steps.
  Trainer again(Mesh::line(MPI_COMM_WORLD), two);
  again.restore(io::load_checkpoint(io::checkpoint_path(ckdir, 5), MPI_COMM_WORLD));
  MPI_CHECK(again.total_steps() == 7);
  MPI_CHECK(std::abs(again.epochs_drawn() - 14.0 / 9) < 1e-15);
  // The same batch size: the run's total as it was.
  Trainer same(Mesh::line(MPI_COMM_WORLD), four);
  same.restore(io::load_checkpoint(io::checkpoint_path(ckdir, 2), MPI_COMM_WORLD));
  MPI_CHECK(same.total_steps() == 5);
}

TEST_CASE("checkpoint: a write that fails midway keeps the previous checkpoint", "[checkpoint]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const std::string ckdir = dir + "/ck-fault";
  if (test::world_rank() == 0) std::filesystem::remove_all(ckdir);
  MPI_Barrier(MPI_COMM_WORLD);
  const TrainConfig cfg = config(data, ckdir);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  Trainer t(mesh, cfg);
  losses(t, 3);
  t.save(io::checkpoint_path(ckdir, 3));
  const io::Checkpoint good = t.checkpoint();
  losses(t, 2);
  for (const std::string stage : {"params", "optimizer", "close"}) {
    io::set_checkpoint_fault_hook([&](const std::string& s) {
      if (s == stage) throw Error("injected fault at " + s);
    });
    MPI_CHECK(test::has(test::error_of([&] { t.save(io::checkpoint_path(ckdir, 5)); }),
                        "injected fault at " + stage));
    io::set_checkpoint_fault_hook({});
    MPI_CHECK(!std::filesystem::exists(io::checkpoint_path(ckdir, 5)));
    MPI_CHECK(io::latest_checkpoint(ckdir, MPI_COMM_WORLD) == io::checkpoint_path(ckdir, 3));
  }
  // The previous checkpoint loads, with its step and parameters, into a fresh trainer.
  const io::Checkpoint c = io::load_checkpoint(io::checkpoint_path(ckdir, 3), MPI_COMM_WORLD);
  MPI_CHECK(c.step == 3);
  Trainer fresh(mesh, cfg);
  fresh.restore(c);
  bool same = c.params.size() == good.params.size();
  for (const NamedTensor& g : good.params) {  // the file lists them in name order
    const NamedTensor* l = nullptr;
    for (const NamedTensor& x : c.params)
      if (x.name == g.name) l = &x;
    same = same && l != nullptr && l->tensor.numel() == g.tensor.numel();
    for (Index i = 0; same && i < g.tensor.numel(); ++i)
      same = l->tensor.data<double>()[i] == g.tensor.data<double>()[i];
  }
  MPI_CHECK(same);
  MPI_CHECK(fresh.steps_done() == 3);
  // A checkpoint from before the UNet's signature named its choices ("norm=0 ... down=0
  // up=0") holds the same model: it resumes; one whose old number means another choice
  // (norm=1: batch) is refused in today's words.
  const auto with_numbers = [&](const std::string& norm) {
    io::Checkpoint old = c;
    for (const auto& [now, then] :
         {std::pair<std::string, std::string>{" norm=group", " norm=" + norm},
          {" down=pool", " down=0"},
          {" up=upsample", " up=0"}}) {
      const std::size_t at = old.model.find(now);
      MPI_REQUIRE(at != std::string::npos);
      old.model.replace(at, now.size(), then);
    }
    return old;
  };
  Trainer older(mesh, cfg);
  older.restore(with_numbers("0"));
  MPI_CHECK(older.steps_done() == 3);
  Trainer other(mesh, cfg);
  MPI_CHECK_ERROR(
      other.restore(with_numbers("1")),
      "checkpoint of another model (norm=batch, not norm=group; groups=0, not groups=2)");
  // The write after the faults succeeds.
  t.save(io::checkpoint_path(ckdir, 5));
  MPI_CHECK(io::latest_checkpoint(ckdir, MPI_COMM_WORLD) == io::checkpoint_path(ckdir, 5));
}

TEST_CASE("training: data the model or mesh cannot take fails on every rank", "[train]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  auto err = [&](const std::vector<std::string>& o) {
    return test::error_of([&] { Trainer t(mesh, config(data, dir + "/ck-err", o)); });
  };
  MPI_CHECK(test::has(err({"model.depth=5"}), "not divisible by 2^depth = 32"));
  MPI_CHECK(test::has(err({"data.inputs=[\"nope\"]"}), "field 'nope' not found"));
  MPI_CHECK(test::has(err({"train.batch_size=10"}), "larger than the 9 training samples"));
  INFO("groups=3: " << err({"model.groups=3"}));
  MPI_CHECK(test::has(err({"model.groups=3"}), "does not divide model.width"));
  MPI_CHECK(test::has(err({"train.accumulate=3"}),
                      "train.batch_size = 4 is not divisible by train.accumulate = 3"));
  if (test::world_size() == 4)
    MPI_CHECK(test::has(test::error_of([&] {
                          Trainer t(Mesh::parse(MPI_COMM_WORLD, "domain=1,data=4"),
                                    config(data, dir + "/ck-err", {"train.batch_size=6"}));
                        }),
                        "not divisible by the 4 ranks"));
  if (test::world_size() == 4)
    MPI_CHECK(test::has(test::error_of([&] {
                          Trainer t(Mesh::parse(MPI_COMM_WORLD, "domain=1,data=4"),
                                    config(data, dir + "/ck-err", {"train.accumulate=2"}));
                        }),
                        "train.batch_size / train.accumulate = 2 samples a micro-batch is not "
                        "divisible by the 4 ranks"));
}

TEST_CASE("checkpoint: a normalization that cannot be used is refused", "[checkpoint]") {
  // An edited or corrupt checkpoint: inference would turn every prediction into NaN (std 0)
  // or rescale it silently (std < 0); resuming would train on it.
  Normalizer in, out;
  in.mean = {0.5, -1.0};
  in.std = {2.0, 0.25};
  out.mean = {3.0};
  out.std = {1.5};
  const auto good = normalizer_buffers(in, out);
  const auto [gi, go] = normalizers_from(good, true);
  MPI_CHECK(gi.std == in.std);
  MPI_CHECK(go.mean == out.mean);
  auto with = [&](const char* name, std::size_t k, double v) {
    auto b = normalizer_buffers(in, out);
    for (auto& nt : b)
      if (nt.name == name) nt.tensor.data<double>()[k] = v;
    return b;
  };
  MPI_CHECK_ERROR(normalizers_from(with("data.input_std", 1, 0.0), true),
                  "data.input_std[1] = 0, not a positive finite number");
  MPI_CHECK_ERROR(normalizers_from(with("data.target_std", 0, -1.0), true),
                  "data.target_std[0] = -1, not a positive finite number");
  MPI_CHECK_ERROR(normalizers_from(with("data.input_std", 0, std::nan("")), true),
                  "data.input_std[0]");
  MPI_CHECK_ERROR(normalizers_from(with("data.target_mean", 0, INFINITY), true),
                  "data.target_mean[0] = inf is not finite");
  Normalizer short_std = in;
  short_std.std.pop_back();
  MPI_CHECK_ERROR(normalizers_from(normalizer_buffers(short_std, out), true),
                  "data.input_mean has 2 values, data.input_std 1");
  auto missing = good;
  missing.pop_back();
  MPI_CHECK_ERROR(normalizers_from(missing, true), "without data.target_std");
  // None where the checkpoint says it trained on normalized data (a deleted group), or
  // one where it says it did not: the weights expect what the setting says.
  MPI_CHECK_ERROR(normalizers_from({}, true), "data.normalize = true, but it holds no");
  MPI_CHECK_ERROR(normalizers_from(good, false), "data.normalize = false, but it holds");
  MPI_CHECK(normalizers_from({}, false).first.identity());
}

TEST_CASE("training: a UNet deeper than its split (ranks with no coarse cell) equals one rank",
          "[train]") {
  // 16 rows at depth 4 leave one coarse row: every domain rank but one holds none there.
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir();
  const std::string data = make_dataset(dir);
  const int n = test::world_size();
  for (const char* depth : {"model.depth=3", "model.depth=4"}) {
    const TrainConfig cfg = config(data, dir + "/ck-deep", {depth});
    Trainer ref(Mesh::line(MPI_COMM_SELF), cfg);
    const std::vector<double> want = losses(ref, 5);
    std::vector<std::string> meshes = {"domain=" + std::to_string(n)};
    if (n == 4) meshes.push_back("x=2,y=2");
    for (const std::string& m : meshes) {
      Trainer t(Mesh::parse(MPI_COMM_WORLD, m), cfg);
      const std::vector<double> got = losses(t, 5);
      INFO(depth << ", mesh " << m << ": max rel diff " << max_rel(got, want));
      MPI_CHECK(max_rel(got, want) < 1e-9);
    }
  }
}
