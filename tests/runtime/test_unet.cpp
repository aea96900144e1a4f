// UNet: the sharded model (domain slabs, 2-D domain grids, batch over a data axis) gives
// the forward output, the input gradient and every parameter gradient of the same model
// run on one rank, in float64 to 1e-9 relative; variants pool/upsample with GroupNorm and
// strided conv/transposed conv with BatchNorm, 2-D and 3-D; shapes the model cannot take.
#include <algorithm>
#include <cmath>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/train/unet.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_tensor.hpp"
#include "tests/support/unet_variants.hpp"

using namespace tessera;

namespace {

double rel_diff(const Tensor& a, const Tensor& b) {
  double num = 0, den = 1e-300;
  for (Index i = 0; i < a.numel(); ++i) {
    num = std::max(num, std::abs(a.data<double>()[i] - b.data<double>()[i]));
    den = std::max(den, std::abs(b.data<double>()[i]));
  }
  return num / den;
}

struct Result {
  Tensor y, dx;
  std::vector<std::pair<std::string, Tensor>> grads;
};

// Forward and backward of a fresh UNet on `mesh` with x and dy split by `dims`; the
// gathered results on every rank.
Result run(const UNetOptions& o, const Mesh& mesh, const std::vector<Placement>& dims,
           const Tensor& x_full, const Tensor& dy_full) {
  UNet net(o);
  const ShardSpec xs(x_full.shape(), dims, mesh);
  const ShardTensor x = ShardTensor::scatter(mesh, x_full, xs);
  const ShardTensor y = net.forward(x);
  const ShardTensor dy = ShardTensor::scatter(mesh, dy_full, y.spec());
  const ShardTensor dx = net.backward(dy);
  std::vector<Parameter*> ps;
  for (const auto& p : net.graph().parameters()) ps.push_back(p.param);
  sync_grads(mesh, ps);
  Result r{y.gather_all(), dx.gather_all(), {}};
  for (const auto& p : net.graph().parameters())
    r.grads.emplace_back(p.name, p.param->grad.clone());
  return r;
}

void compare_on(const UNetOptions& o, const std::vector<Index>& shape, const Mesh& mesh,
                const std::vector<Placement>& dims) {
  const Tensor x = test::random_tensor(shape, DType::f64, 3);
  std::vector<Index> yshape = shape;
  yshape[1] = o.out_channels;
  const Tensor dy = test::random_tensor(yshape, DType::f64, 5);
  const Mesh one = Mesh::line(MPI_COMM_SELF);
  std::vector<Placement> rep(shape.size(), Replicate());
  const Result ref = run(o, one, rep, x, dy);
  const Result got = run(o, mesh, dims, x, dy);
  INFO("mesh " << mesh.str());
  MPI_CHECK(rel_diff(got.y, ref.y) < 1e-9);
  MPI_CHECK(rel_diff(got.dx, ref.dx) < 1e-9);
  MPI_REQUIRE(got.grads.size() == ref.grads.size());
  double worst = 0;
  std::string worst_name;
  for (std::size_t i = 0; i < got.grads.size(); ++i) {
    const double d = rel_diff(got.grads[i].second, ref.grads[i].second);
    if (d > worst) worst = d, worst_name = got.grads[i].first;
  }
  INFO("worst parameter gradient " << worst_name << ": " << worst);
  MPI_CHECK(worst < 1e-9);
  // The gradients are not trivially zero.
  double norm = 0;
  for (const auto& g : ref.grads)
    for (Index i = 0; i < g.second.numel(); ++i) norm += std::abs(g.second.data<double>()[i]);
  MPI_CHECK(norm > 1e-3);
}

// The meshes of this rank count and how (N, C, spatial...) is split over them.
std::vector<std::pair<Mesh, std::vector<Placement>>> layouts(int nd) {
  const int n = test::world_size();
  std::vector<std::pair<Mesh, std::vector<Placement>>> out;
  std::vector<Placement> slab(static_cast<std::size_t>(nd) + 2, Replicate());
  slab[2] = Shard(0);
  out.emplace_back(Mesh::line(MPI_COMM_WORLD), slab);
  if (n % 2 == 0 && n > 2) {
    const Mesh grid(MPI_COMM_WORLD, {2, n / 2}, {"y", "x"});
    std::vector<Placement> g = slab;
    g[3] = Shard(1);
    out.emplace_back(grid, g);
    const Mesh dd(MPI_COMM_WORLD, {n / 2, 2}, {"domain", "data"});
    std::vector<Placement> b = slab;
    b[0] = Shard(1);
    out.emplace_back(dd, b);
  }
  return out;
}

}  // namespace

TEST_CASE("UNet pool/upsample GroupNorm: sharded == one rank", "[unet]") {
  const UNetOptions o = test::unet_pool_groupnorm();
  for (const auto& [mesh, dims] : layouts(2)) compare_on(o, {2, 2, 16, 12}, mesh, dims);
}

TEST_CASE("UNet strided conv/transposed conv BatchNorm ReLU: sharded == one rank", "[unet]") {
  const UNetOptions o = test::unet_strided_batchnorm();
  for (const auto& [mesh, dims] : layouts(2)) compare_on(o, {2, 1, 16, 8}, mesh, dims);
}

TEST_CASE("UNet 3-D, no norm, tanh: sharded == one rank", "[unet]") {
  UNetOptions o;
  o.nd = 3;
  o.width = 2;
  o.depth = 1;
  o.norm = UNetOptions::Norm::None;
  o.activation = kernels::Activation::Tanh;
  o.dtype = DType::f64;
  for (const auto& [mesh, dims] : layouts(3)) compare_on(o, {1, 1, 8, 6, 4}, mesh, dims);
}

TEST_CASE("UNet with circular, reflect and replicate padding: sharded == one rank", "[unet]") {
  // The border convs pad with the periodic, mirrored or repeated cells of other ranks.
  for (PaddingMode m : {PaddingMode::Circular, PaddingMode::Reflect, PaddingMode::Replicate}) {
    UNetOptions o = test::unet_pool_groupnorm();
    o.padding = m;
    INFO(name_of(m));
    for (const auto& [mesh, dims] : layouts(2)) compare_on(o, {1, 2, 12, 8}, mesh, dims);
  }
}

TEST_CASE("UNet names its parameters and rejects shapes it cannot take", "[unet]") {
  UNetOptions o;
  o.depth = 2;
  o.width = 8;
  UNet net(o);
  const auto ps = net.graph().parameters();
  MPI_REQUIRE(!ps.empty());
  MPI_CHECK(ps.front().name == "enc0.conv1.weight");
  MPI_CHECK(ps.back().name == "head.bias");
  MPI_CHECK(net.input_problem({1, 1, 16, 24}).empty());
  MPI_CHECK(test::has(net.input_problem({1, 1, 16, 10}), "not divisible by 2^depth = 4"));
  MPI_CHECK(test::has(net.input_problem({1, 3, 16, 16}), "takes 1 input channels"));
  MPI_CHECK(test::has(net.input_problem({1, 1, 16}), "spatial dims"));
  {
    UNetOptions r = o;  // reflect padding 1 needs 2 cells at depth 2: 8 = 2 x 4
    r.padding = PaddingMode::Reflect;
    UNet reflect(r);
    MPI_CHECK(reflect.input_problem({1, 1, 8, 16}).empty());
    MPI_CHECK(test::has(reflect.input_problem({1, 1, 4, 16}), "narrower than every level"));
    MPI_CHECK(net.signature().find("padding") == std::string::npos);  // zeros: as before
    MPI_CHECK(test::has(reflect.signature(), " padding=reflect"));
  }
  o.groups = 3;
  MPI_CHECK(test::has(test::error_of([&] { UNet bad(o); }), "must divide the width"));
  o.groups = 4;
  o.kernel = 4;
  MPI_CHECK(test::has(test::error_of([&] { UNet bad(o); }), "must be odd"));
}
