// Point models end to end, float64: the Transolver on the shared grid dataset (cells as
// tokens) and on a point-cloud file (coords and a feature in, a neighbourhood mean of the
// feature out), and the point-convolution model on the point cloud: the loss curve of 20
// steps on the world's domain mesh, a data-parallel mesh and a 2x2 domain x data mesh equals
// a one-rank run to 1e-9 relative; 10 steps on one rank + checkpoint + restart at the
// world's rank count + 10 steps == 20 straight; bad point quantities are refused.
#include <algorithm>

#include "tests/support/layer_check.hpp"
#include "tests/support/train_fixture.hpp"

using namespace tessera;
using namespace tessera::app;
using namespace tessera::test;

namespace {

const std::vector<std::string> kPointConv = {"model.type=pointconv", "model.width=6",
                                             "model.layers=2", "model.neighbours=6",
                                             "optim.lr=0.01"};
const std::vector<std::string> kTransolver = {"model.type=transolver", "model.width=8",
                                              "model.layers=2",        "model.heads=2",
                                              "model.slices=4",        "optim.lr=0.01"};

// N clouds of P points in the unit cube with a feature f and its mean over the 8 nearest
// points g (brute force): g needs the neighbourhood, so a pointwise map cannot learn it.
std::string make_points(const std::string& dir, Index n = 12, Index P = 97) {
  const std::string path = dir + "/points.h5";
  io::File f = io::File::create(path, MPI_COMM_WORLD);
  io::schema::write_root(f, "test_train_transolver");
  Tensor xyz = Tensor::empty({n, P, 3}, DType::f32), feat = Tensor::empty({n, P, 2}, DType::f32);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (Index s = 0; s < n; ++s) {
    for (Index p = 0; p < P; ++p) {
      for (int k = 0; k < 3; ++k) xyz.at<float>({s, p, k}) = static_cast<float>(u(rng));
      const double x = xyz.at<float>({s, p, 0}), y = xyz.at<float>({s, p, 1});
      feat.at<float>({s, p, 0}) =
          static_cast<float>(std::sin(6 * x + s) * std::cos(4 * y) + u(rng));
    }
    for (Index p = 0; p < P; ++p) {
      std::vector<std::pair<double, Index>> d;
      for (Index q = 0; q < P; ++q) {
        double r2 = 0;
        for (int k = 0; k < 3; ++k) {
          const double t = xyz.at<float>({s, p, k}) - xyz.at<float>({s, q, k});
          r2 += t * t;
        }
        d.push_back({r2, q});
      }
      std::sort(d.begin(), d.end());
      double m = 0;
      for (int j = 0; j < 8; ++j)
        m += feat.at<float>({s, d[static_cast<std::size_t>(j)].second, 0});
      feat.at<float>({s, p, 1}) = static_cast<float>(m / 8);
    }
  }
  const bool me = test::world_rank() == 0;
  for (const auto& [dset, t] :
       {std::pair{io::schema::kCoords, xyz}, std::pair{io::schema::kFeatures, feat}}) {
    f.create_dataset(dset, t.shape(), DType::f32);
    const Box all = me ? Box::from_shape(t.shape()) : Box({0, 0, 0}, {0, 0, 0});
    io::write_box(f, dset, all, t, all);
  }
  f.set_attr(io::schema::kFeatures, "variables", std::vector<std::string>{"f", "g"});
  f.close();
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

TrainConfig points_config(const std::string& data, const std::string& ckdir,
                          std::vector<std::string> extra = kTransolver) {
  extra.push_back("data.inputs=[\"coords\", \"f\"]");
  extra.push_back("data.targets=[\"g\"]");
  return config(data, ckdir, extra);
}

void same_curve_on_every_mesh(const TrainConfig& cfg) {
  Trainer ref(Mesh::line(MPI_COMM_SELF), cfg);
  const std::vector<double> want = losses(ref, 20);
  const EvalResult want_val = ref.validate();
  INFO("one-rank losses: first " << want.front() << ", last " << want.back());
  MPI_CHECK(want.back() < 0.8 * want.front());  // it learns
  const int n = world_size();
  std::vector<std::string> meshes = {"domain=" + std::to_string(n)};
  if (4 % n == 0 && n > 1) meshes.push_back("data=" + std::to_string(n));
  if (n == 4) meshes.push_back("domain=2,data=2");
  for (const std::string& m : meshes) {
    Trainer t(Mesh::parse(MPI_COMM_WORLD, m), cfg);
    const std::vector<double> got = losses(t, 20);
    const EvalResult val = t.validate();
    INFO("mesh " << m << ": max rel diff " << max_rel(got, want));
    MPI_CHECK(max_rel(got, want) < 1e-9);
    MPI_CHECK(std::abs(val.loss - want_val.loss) < 1e-9 * want_val.loss);
  }
}

}  // namespace

TEST_CASE("transolver on grid cells: the loss curve on any mesh equals one rank's",
          "[transolver]") {
  const std::string dir = test_dir("transolver");
  same_curve_on_every_mesh(config(make_dataset(dir), dir + "/ck-grid", kTransolver));
}

TEST_CASE("transolver on a point cloud: the loss curve on any mesh equals one rank's",
          "[transolver]") {
  const std::string dir = test_dir("transolver");
  same_curve_on_every_mesh(points_config(make_points(dir), dir + "/ck-points"));
}

TEST_CASE("pointconv on a point cloud: the loss curve on any mesh equals one rank's",
          "[pointconv]") {
  const std::string dir = test_dir("transolver");
  same_curve_on_every_mesh(points_config(make_points(dir), dir + "/ck-pc", kPointConv));
}

TEST_CASE("point models: the memory estimate bounds a step's allocations", "[points]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir("points");
  const std::string cloud = make_points(dir);
  for (const auto& m : {kTransolver, kPointConv})
    check_memory_estimate(Mesh::line(MPI_COMM_WORLD), points_config(cloud, dir + "/ck-mem", m));
}

TEST_CASE("point models: recompute gives the loss curve without it, bit for bit", "[points]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir("points");
  const std::string cloud = make_points(dir);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  for (auto m : {kTransolver, kPointConv}) {
    Trainer plain(mesh, points_config(cloud, dir + "/ck-rc", m));
    m.push_back("train.recompute=true");
    Trainer again(mesh, points_config(cloud, dir + "/ck-rc", m));
    const std::vector<double> want = losses(plain, 5), got = losses(again, 5);
    INFO(m.front() << ": max rel diff " << max_rel(got, want));
    MPI_CHECK(got == want);
  }
}

TEST_CASE("point models: data streamed from the file gives the in-memory run bit for bit",
          "[points]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  setenv("TESSERA_IO_PIECE_BYTES", "4096", 1);  // scans in runs of a few samples
  const std::string dir = test_dir("points");
  const std::string cloud = make_points(dir);
  const int n = world_size();
  std::vector<std::string> meshes = {"domain=" + std::to_string(n)};
  if (n == 2) meshes.push_back("data=2");
  for (const std::string& mesh_spec : meshes)
    for (auto m : {kTransolver, kPointConv}) {
      const Mesh mesh = Mesh::parse(MPI_COMM_WORLD, mesh_spec);
      Trainer memory(mesh, points_config(cloud, dir + "/ck-st", m));
      m.push_back("data.stream=true");
      Trainer streamed(mesh, points_config(cloud, dir + "/ck-st", m));
      MPI_CHECK(streamed.data().streamed());
      const std::vector<double> want = losses(memory, 5), got = losses(streamed, 5);
      INFO(m.front() << ", mesh " << mesh_spec << ": max rel diff " << max_rel(got, want));
      MPI_CHECK(got == want);
      MPI_CHECK(streamed.validate().loss == memory.validate().loss);
    }
  unsetenv("TESSERA_IO_PIECE_BYTES");
}

TEST_CASE("point models: a forward without gradients equals the training one, holds less",
          "[points]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string dir = test_dir("points");
  const std::string cloud = make_points(dir);
  for (const auto& m : {kTransolver, kPointConv})
    check_forward_without_grad(Mesh::line(MPI_COMM_WORLD),
                               points_config(cloud, dir + "/ck-eval", m), {4, 4, 97});
}

TEST_CASE("pointconv needs a point cloud with coordinates", "[pointconv]") {
  const std::string dir = test_dir("transolver");
  std::vector<std::string> extra = kPointConv;
  const TrainConfig grid = config(make_dataset(dir), dir + "/ck-pc-bad", extra);
  MPI_CHECK(throws_with([&] { Trainer t(Mesh::line(MPI_COMM_WORLD), grid); },
                        "needs a point cloud with \"coords\""));
  extra.push_back("data.inputs=[\"f\"]");
  extra.push_back("data.targets=[\"g\"]");
  const TrainConfig no_coords = config(make_points(dir), dir + "/ck-pc-bad", extra);
  MPI_CHECK(throws_with([&] { Trainer t(Mesh::line(MPI_COMM_WORLD), no_coords); },
                        "needs a point cloud with \"coords\""));
}

TEST_CASE("grid models refuse a point cloud (its storage order is no grid)", "[points]") {
  const std::string dir = test_dir("transolver");
  const std::string cloud = make_points(dir);
  for (const char* type : {"fno", "unet", "vit"}) {
    const TrainConfig c = points_config(cloud, dir + "/ck-grid-on-points",
                                        {std::string("model.type=") + type, "model.width=4"});
    MPI_CHECK(throws_with(
        [&] { Trainer t(Mesh::line(MPI_COMM_WORLD), c); },
        std::string("model.type = '") + type + "' takes grid fields, not point clouds"));
  }
}

TEST_CASE("point models: 10 steps, save, restart at another rank count, 10 more == 20 straight",
          "[transolver]") {
  const std::string dir = test_dir("transolver");
  for (const auto& model : {kTransolver, kPointConv}) {
    const std::string ckdir = dir + "/ck-restart-" + model[0].substr(11);
    const TrainConfig cfg = points_config(make_points(dir), ckdir, model);
    const int n = world_size();
    const Mesh world =
        n == 4 ? Mesh::parse(MPI_COMM_WORLD, "domain=2,data=2") : Mesh::line(MPI_COMM_WORLD);
    Trainer straight(world, cfg);
    const std::vector<double> want = losses(straight, 20);
    std::vector<double> got = first_steps_on_rank0(cfg, ckdir, 10);
    Trainer second(world, cfg);
    second.restore(
        io::load_checkpoint(io::latest_checkpoint(ckdir, MPI_COMM_WORLD), MPI_COMM_WORLD));
    for (double l : losses(second, 10)) got.push_back(l);
    INFO("max rel diff " << max_rel(got, want) << ", parameters " << param_diff(second, straight));
    MPI_CHECK(max_rel(got, want) < 1e-12);
    MPI_CHECK(param_diff(second, straight) < 1e-12);
  }
}

TEST_CASE("point quantities that do not exist or mix with grid fields are refused",
          "[transolver]") {
  const std::string dir = test_dir("transolver");
  const std::string pts = make_points(dir);
  const auto fails = [&](const std::vector<std::string>& in, const std::string& needle) {
    std::vector<std::string> extra = kTransolver;
    std::string list = "data.inputs=[";
    for (std::size_t i = 0; i < in.size(); ++i) list += (i ? ", \"" : "\"") + in[i] + "\"";
    extra.push_back(list + "]");
    extra.push_back("data.targets=[\"g\"]");
    const TrainConfig cfg = config(pts, dir + "/ck-bad", extra);
    return throws_with([&] { Trainer t(Mesh::line(MPI_COMM_WORLD), cfg); }, needle);
  };
  MPI_CHECK(fails({"coords", "h"}, "not 'coords' or a /points/features variable"));
  MPI_CHECK(fails({"coords", "f"}, "") == false);
}
