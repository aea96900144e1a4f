// ViT training end to end on the shared grid dataset, float64: the loss curve of 20 steps on
// the world's domain mesh, a data-parallel mesh and a 2x2 domain x data mesh equals a one-rank
// run to 1e-9 relative (every global attention algorithm on the domain mesh, and
// neighbourhood attention on domain, 2x2 and domain x data meshes); 10 steps on one rank +
// checkpoint + restart at the world's rank count + 10 steps == 20 straight; the same with
// learned position embeddings (the table sharded with the patches); the same parameters run
// on a larger grid, sharded or not (learned positions interpolated); grids the patches do not
// fit are refused.
#include "tests/support/layer_check.hpp"
#include "tests/support/train_fixture.hpp"

using namespace tessera;
using namespace tessera::app;
using namespace tessera::test;

namespace {
const std::vector<std::string> kVit = {"model.type=vit", "model.patch=4", "model.dim=8",
                                       "model.depth=2",  "model.heads=2", "optim.lr=0.05"};

// The loss curve of 20 steps of `cfg` equals `want` on the world's domain line (where the 4
// patch rows split over it), a 2x2 spatial mesh and a 2x2 domain x data mesh.
void check_curves_on_meshes(const TrainConfig& cfg, const std::vector<double>& want) {
  const int n = world_size();
  std::vector<std::string> meshes;
  if (4 % n == 0) meshes.push_back("domain=" + std::to_string(n));
  if (n == 4) meshes.push_back("x=2,y=2");
  if (n == 4) meshes.push_back("domain=2,data=2");
  for (const std::string& m : meshes) {
    Trainer t(Mesh::parse(MPI_COMM_WORLD, m), cfg);
    const std::vector<double> got = losses(t, 20);
    INFO("mesh " << m << ": max rel diff " << max_rel(got, want));
    MPI_CHECK(max_rel(got, want) < 1e-9);
  }
}
// A ViT of one block on 4x4 patches, float64: the forward-only tests' model.
VitOptions small_vit() {
  VitOptions o;
  o.patch = 4;
  o.dim = 8;
  o.depth = 1;
  o.heads = 2;
  o.dtype = DType::f64;
  return o;
}

}  // namespace

TEST_CASE("vit: the loss curve on any mesh equals one rank's", "[vit]") {
  const std::string dir = test_dir("vit");
  const TrainConfig cfg = config(make_dataset(dir), dir + "/ck-eq", kVit);
  Trainer ref(Mesh::line(MPI_COMM_SELF), cfg);
  const std::vector<double> want = losses(ref, 20);
  INFO("one-rank losses: first " << want.front() << ", last " << want.back());
  MPI_CHECK(want.back() < 0.8 * want.front());  // it learns
  const int n = world_size();
  std::vector<std::pair<std::string, std::string>> runs;  // mesh, attention
  for (const char* a : {"auto", "ring", "all_to_all", "all_gather"})
    if (4 % n == 0) runs.push_back({"domain=" + std::to_string(n), a});
  if (4 % n == 0 && n > 1) runs.push_back({"data=" + std::to_string(n), "auto"});
  if (n == 4) runs.push_back({"domain=2,data=2", "auto"});
  if (n == 4) runs.push_back({"x=2,y=2", "ring"});
  for (const auto& [m, a] : runs) {
    std::vector<std::string> extra = kVit;
    extra.push_back("model.attention=" + a);
    const TrainConfig c = config(make_dataset(dir), dir + "/ck-eq", extra);
    Trainer t(Mesh::parse(MPI_COMM_WORLD, m), c);
    const std::vector<double> got = losses(t, 20);
    INFO("mesh " << m << ", attention " << a << ": max rel diff " << max_rel(got, want));
    MPI_CHECK(max_rel(got, want) < 1e-9);
  }
}

TEST_CASE("vit with neighbourhood attention: the loss curve on any mesh equals one rank's",
          "[vit]") {
  const std::string dir = test_dir("vit");
  std::vector<std::string> extra = kVit;
  extra.push_back("model.attention=neighbourhood");
  extra.push_back("model.window=3");
  const TrainConfig cfg = config(make_dataset(dir), dir + "/ck-na", extra);
  Trainer ref(Mesh::line(MPI_COMM_SELF), cfg);
  const std::vector<double> want = losses(ref, 20);
  INFO("one-rank losses: first " << want.front() << ", last " << want.back());
  MPI_CHECK(want.back() < 0.8 * want.front());
  check_curves_on_meshes(cfg, want);
}

TEST_CASE("vit with learned positions: loss curves on any mesh, restart at another rank count",
          "[vit]") {
  const std::string dir = test_dir("vit");
  std::vector<std::string> extra = kVit;
  extra.push_back("model.positions=learned");
  const std::string ckdir = dir + "/ck-learned";
  const TrainConfig cfg = config(make_dataset(dir), ckdir, extra);
  Trainer ref(Mesh::line(MPI_COMM_SELF), cfg);
  const std::vector<double> want = losses(ref, 20);
  MPI_CHECK(want.back() < 0.8 * want.front());
  check_curves_on_meshes(cfg, want);
  // The checkpoint holds the table whole: one rank's 10 steps go on sharded at n ranks.
  const int n = world_size();
  if (4 % n != 0) return;
  std::vector<double> got = first_steps_on_rank0(cfg, ckdir, 10);
  Trainer second(Mesh::parse(MPI_COMM_WORLD, "domain=" + std::to_string(n)), cfg);
  second.restore(io::load_checkpoint(io::latest_checkpoint(ckdir, MPI_COMM_WORLD), MPI_COMM_WORLD));
  for (double l : losses(second, 10)) got.push_back(l);
  INFO("restart: max rel diff " << max_rel(got, want));
  MPI_CHECK(max_rel(got, want) < 1e-9);
}

TEST_CASE("vit: 10 steps, save, restart at another rank count, 10 more == 20 straight", "[vit]") {
  const std::string dir = test_dir("vit");
  const std::string ckdir = dir + "/ck-restart";
  const TrainConfig cfg = config(make_dataset(dir), ckdir, kVit);
  const int n = world_size();
  const Mesh world =
      n == 4 ? Mesh::parse(MPI_COMM_WORLD, "domain=2,data=2") : Mesh::line(MPI_COMM_WORLD);
  Trainer straight(world, cfg);
  const std::vector<double> want = losses(straight, 20);
  std::vector<double> got = first_steps_on_rank0(cfg, ckdir, 10);
  Trainer second(world, cfg);
  second.restore(io::load_checkpoint(io::latest_checkpoint(ckdir, MPI_COMM_WORLD), MPI_COMM_WORLD));
  for (double l : losses(second, 10)) got.push_back(l);
  INFO("max rel diff " << max_rel(got, want) << ", parameters " << param_diff(second, straight));
  MPI_CHECK(max_rel(got, want) < 1e-12);
  // Adam divides by sqrt(v): near-zero gradients summed in another order move a parameter
  // by up to lr x 1e-10 more (the losses above still agree to 1e-12).
  MPI_CHECK(param_diff(second, straight) < 1e-10);
}

TEST_CASE("vit: the same parameters run on a larger grid; unfit grids are refused", "[vit]") {
  const VitOptions o = small_vit();
  Vit net(o);
  VitOptions lo = o;
  lo.learned_positions = true;
  lo.position_grid = {4, 4};  // trained on 16x16
  Vit learned(lo);
  const Mesh world = Mesh::line(MPI_COMM_WORLD);
  const int n = world_size();
  for (Vit* m : {&net, &learned})
    for (Index e : {16, 32}) {
      const Index rows = e * n;  // whole patches per rank
      const std::vector<Index> shape{1, 1, rows, e};
      MPI_CHECK(m->input_problem(shape).empty());
      const Tensor x = random_tensor(shape, DType::f64, 5);
      const Mesh self = Mesh::line(MPI_COMM_SELF);
      const Tensor one =
          m->forward(ShardTensor(self, ShardSpec::replicated(shape, self), x)).local();
      const Tensor many =
          m->forward(
               ShardTensor::scatter(world, x, {Replicate(), Replicate(), Shard(0), Replicate()}))
              .gather_all();
      MPI_CHECK(rel_error(many, one) < 1e-12);
    }
  MPI_CHECK(net.input_problem({1, 1, 18, 16}).find("not a multiple of model.patch") !=
            std::string::npos);
}

TEST_CASE("vit: a split that cuts patches runs on whole patches, forward and backward", "[vit]") {
  // Rows of one patch more than the ranks split evenly (and at 1 rank, 5 patches): the
  // grid's default split cuts patches; the ViT realigns its blocks to whole patches and
  // returns its output to the grid's split. With one patch row fewer than the ranks, the
  // last rank holds no patch; on a 2x2 mesh, one patch row over two ranks and two patch
  // columns. Output and input gradient equal one rank.
  const VitOptions o = small_vit();
  const int n = world_size();
  for (int config = 0; config < 6; ++config) {
    const bool window = config % 2 == 1, fewer = config >= 2, grid2d = config >= 4;
    if ((fewer && n == 1) || (grid2d && n != 4)) continue;
    VitOptions v = o;
    // 2n + 1 patches: not a multiple of the ranks; or n - 1 patches: one rank holds none
    const Index rows = grid2d ? 4 : fewer ? 4 * (n - 1) : 4 * (2 * n + 1);
    if (window) v.window = std::min<Index>(3, rows / 4);  // at most the patch rows
    Vit net(v);
    const Mesh world = grid2d ? Mesh::parse(MPI_COMM_WORLD, "x=2,y=2") : Mesh::line(MPI_COMM_WORLD);
    const std::vector<Index> shape{2, 1, rows, grid2d ? Index{8} : Index{12}};
    const Tensor x = random_tensor(shape, DType::f64, 7);
    const Tensor dy = random_tensor(shape, DType::f64, 8);
    const Mesh self = Mesh::line(MPI_COMM_SELF);
    const ShardSpec one_spec = ShardSpec::replicated(shape, self);
    const Tensor y1 = net.forward(ShardTensor(self, one_spec, x)).local().clone();
    const Tensor dx1 = net.backward(ShardTensor(self, one_spec, dy)).local().clone();
    const std::vector<Placement> split = {Replicate(), Replicate(), Shard(0),
                                          grid2d ? Placement(Shard(1)) : Replicate()};
    const ShardTensor ys = net.forward(ShardTensor::scatter(world, x, split));
    MPI_CHECK(ys.spec() == ShardSpec(shape, split, world));  // the grid's own split
    const Tensor yn = ys.gather_all();
    const Tensor dxn = net.backward(ShardTensor::scatter(world, dy, split)).gather_all();
    INFO("window " << window << ", shape " << shape_str(shape) << ", mesh " << world.str()
                   << ": output " << rel_error(yn, y1) << ", dx " << rel_error(dxn, dx1));
    MPI_CHECK(rel_error(yn, y1) < 1e-12);
    MPI_CHECK(rel_error(dxn, dx1) < 1e-11);
  }
}
