// FNO training end to end on the shared small dataset, float64: the loss curve of 20 steps
// on the world's domain mesh, a data-parallel mesh and a 2x2 domain x data mesh equals a
// one-rank run to 1e-9 relative, spectral weights replicated or sharded by mode; 10 steps on
// one rank + checkpoint + restart at the world's rank count (either weight layout) + 10 steps
// == 20 straight; the model runs on a finer grid than it trained on. The modes differ per
// dim (4 and 3).
#include "tests/support/expect_error.hpp"
#include "tests/support/train_fixture.hpp"

using namespace tessera;
using namespace tessera::app;
using namespace tessera::test;

namespace {
const std::vector<std::string> kFno = {"model.type=fno", "model.width=6",      "model.modes=4,3",
                                       "model.layers=2", "model.projection=8", "optim.lr=0.02"};
std::vector<std::string> with(std::vector<std::string> v, const std::string& s) {
  v.push_back(s);
  return v;
}
}  // namespace

TEST_CASE("fno: the loss curve on any mesh equals one rank's", "[fno]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir("fno");
  const TrainConfig cfg = config(make_dataset(dir), dir + "/ck-eq", kFno);
  Trainer ref(Mesh::line(MPI_COMM_SELF), cfg);
  const std::vector<double> want = losses(ref, 20);
  const EvalResult want_val = ref.validate();
  INFO("one-rank losses: first " << want.front() << ", last " << want.back());
  MPI_CHECK(want.back() < 0.7 * want.front());  // it learns
  const int n = world_size();
  std::vector<std::string> meshes = {"domain=" + std::to_string(n)};
  if (4 % n == 0 && n > 1) meshes.push_back("data=" + std::to_string(n));
  if (n == 4) meshes.push_back("domain=2,data=2");
  const TrainConfig sharded =
      config(dir + "/data.h5", dir + "/ck-eq", with(kFno, "model.weights=mode_sharded"));
  for (const std::string& m : meshes)
    for (const TrainConfig* c : {&cfg, &sharded}) {
      Trainer t(Mesh::parse(MPI_COMM_WORLD, m), *c);
      const std::vector<double> got = losses(t, 20);
      const EvalResult val = t.validate();
      INFO("mesh " << m << ", spectral weights " << c->model.weights << ": max rel diff "
                   << max_rel(got, want));
      MPI_CHECK(max_rel(got, want) < 1e-9);
      MPI_CHECK(std::abs(val.loss - want_val.loss) < 1e-9 * want_val.loss);
    }
}

TEST_CASE("fno: 10 steps, save, restart at another rank count, 10 more == 20 straight", "[fno]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir("fno");
  const std::string ckdir = dir + "/ck-restart";
  const TrainConfig cfg = config(make_dataset(dir), ckdir, kFno);
  const int n = world_size();
  const Mesh world =
      n == 4 ? Mesh::parse(MPI_COMM_WORLD, "domain=2,data=2") : Mesh::line(MPI_COMM_WORLD);
  Trainer straight(world, cfg);
  const std::vector<double> want = losses(straight, 20);
  const std::vector<double> first = first_steps_on_rank0(cfg, ckdir, 10);
  // The checkpoint holds the spectral weights whole: a run with them sharded by mode resumes
  // from it as well.
  for (const std::string w : {"replicated", "mode_sharded"}) {
    const TrainConfig c = config(dir + "/data.h5", ckdir, with(kFno, "model.weights=" + w));
    Trainer second(world, c);
    second.restore(
        io::load_checkpoint(io::latest_checkpoint(ckdir, MPI_COMM_WORLD), MPI_COMM_WORLD));
    std::vector<double> got = first;
    for (double l : losses(second, 10)) got.push_back(l);
    INFO("weights " << w << ": max rel diff " << max_rel(got, want) << ", parameters "
                    << param_diff(second, straight));
    MPI_CHECK(max_rel(got, want) < 1e-12);
    MPI_CHECK(param_diff(second, straight) < 1e-12);
  }
}

TEST_CASE("fno: the same parameters run on a finer grid, sharded or not", "[fno]") {
  FnoOptions o;
  o.modes = {3};
  o.width = 4;
  o.layers = 2;
  o.projection = 4;
  o.dtype = DType::f64;
  Fno net(o);
  const Mesh world = Mesh::line(MPI_COMM_WORLD);
  for (Index n : {8, 16, 32}) {
    const std::vector<Index> shape{1, 1, n, n};
    MPI_CHECK(net.input_problem(shape).empty());
    const Tensor x = random_tensor(shape, DType::f64, 5);
    const Mesh self = Mesh::line(MPI_COMM_SELF);
    const Tensor one =
        net.forward(ShardTensor(self, ShardSpec::replicated(shape, self), x)).local();
    const Tensor many =
        net.forward(
               ShardTensor::scatter(world, x, {Replicate(), Replicate(), Shard(0), Replicate()}))
            .gather_all();
    double err = 0, scale = 1e-300;
    for (Index i = 0; i < one.numel(); ++i) {
      err = std::max(err, std::abs(one.data<double>()[i] - many.data<double>()[i]));
      scale = std::max(scale, std::abs(one.data<double>()[i]));
    }
    MPI_CHECK(err / scale < 1e-12);
  }
  MPI_CHECK(net.input_problem({1, 1, 4, 4}).find("too small for 3 Fourier modes") !=
            std::string::npos);
}

TEST_CASE("fno: model.modes needs one value or one per spatial dim of the fields", "[fno]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir("fno");
  const TrainConfig cfg =
      config(make_dataset(dir), dir + "/ck-modes", with(kFno, "model.modes=4,3,2"));
  MPI_CHECK_ERROR(Trainer(Mesh::line(MPI_COMM_WORLD), cfg),
                  "model.modes has 3 values for 2-D fields: give one value for every dim, or one "
                  "per dim");
  // Modes far past the grid are refused before the weights exist (1000 modes would be
  // gigabytes of weights per layer).
  const TrainConfig huge =
      config(dir + "/data.h5", dir + "/ck-modes", with(kFno, "model.modes=1000"));
  MPI_CHECK_ERROR(
      Trainer(Mesh::line(MPI_COMM_WORLD), huge),
      "model.modes: the data's grid (16, 16) cannot take them: spatial extent 16 (spatial "
      "dim 0 of the grid (16, 16)) is too small for 1000 Fourier modes (more modes than points)");
  // The largest integer: no overflow of 2 x modes into a small bound.
  MPI_CHECK_ERROR(
      Trainer(Mesh::line(MPI_COMM_WORLD), config(dir + "/data.h5", dir + "/ck-modes",
                                                 with(kFno, "model.modes=9223372036854775807"))),
      "is too small for 9223372036854775807 Fourier modes (more modes than points)");
  MPI_CHECK_ERROR(
      Trainer(Mesh::line(MPI_COMM_WORLD),
              config(dir + "/data.h5", dir + "/ck-modes", with(kFno, "model.modes=9"))),
      "spatial extent 16 (spatial dim 0 of the grid (16, 16)) is too small for 9 Fourier modes "
      "(needs at least 18)");
}
