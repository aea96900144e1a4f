#include "runtime/tensor/shard_tensor.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"

using namespace tessera;

namespace {
// Random placements for a rank-nd tensor on mesh m: each mesh axis shards at most one
// dim; some dims stay replicated. Same on every rank for the same rng state.
std::vector<Placement> random_placements(std::mt19937& rng, int nd, const Mesh& m) {
  std::vector<Placement> p(nd);
  for (int a = 0; a < m.ndim(); ++a) {
    const int d = static_cast<int>(rng() % (nd + 1));  // nd: axis left unused
    if (d < nd && !p[d].sharded()) p[d] = Shard(a);
  }
  return p;
}
}  // namespace

TEST_CASE("scatter then gather is exact for random shapes, specs and uneven sizes", "[shard]") {
  std::mt19937 rng(42);  // identical sequence on every rank
  int cases = 0;
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (int trial = 0; trial < 12; ++trial) {
      const int nd = 1 + static_cast<int>(rng() % 4);
      const auto shape = [&] {
        std::vector<Index> s(nd);
        for (auto& e : s) e = static_cast<Index>(rng() % 9);  // zeros and shards thinner than ranks
        return s;
      }();
      const auto dims = random_placements(rng, nd, mesh);
      std::vector<std::vector<Index>> sizes(nd);
      if (trial % 2)
        for (int d = 0; d < nd; ++d)
          if (dims[d].sharded())
            sizes[d] = test::random_sizes(rng, shape[d], mesh.dim(dims[d].axis));
      const ShardSpec spec(shape, dims, mesh, {}, sizes);
      for (DType dt : {DType::f64, DType::i64}) {
        const Tensor ref = test::reference(shape, dt, trial);
        const int root = trial % mesh.size();
        ShardTensor st =
            ShardTensor::scatter(mesh, mesh.rank() == root ? ref : Tensor(), spec, root);
        INFO("mesh " << mesh.str() << " spec " << spec.str() << " root " << root);
        MPI_REQUIRE(st.local().shape() == spec.local_shape(mesh.coords()));
        MPI_REQUIRE(test::same(st.local(), ref.view(st.local_box())));
        const int groot = (root + 1) % mesh.size();
        Tensor back = st.gather(groot);
        MPI_REQUIRE(mesh.rank() != groot || test::same(back, ref));
        MPI_REQUIRE(mesh.rank() == groot || !back.defined());
        MPI_REQUIRE(test::same(st.gather_all(), ref));
        ++cases;
      }
    }
  }
  MPI_REQUIRE(cases > 0);
}

TEST_CASE("scatter by placements broadcasts root's shape and dtype", "[shard]") {
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const Tensor ref = test::reference({7, 5}, DType::i64, 3);
  ShardTensor st =
      ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), {Shard(0), Replicate()});
  MPI_REQUIRE(st.dtype() == DType::i64);
  MPI_REQUIRE(st.global_shape() == (std::vector<Index>{7, 5}));
  MPI_REQUIRE(test::same(st.local(), ref.view(st.local_box())));
}

TEST_CASE("from_local infers uneven sizes with one collective, or takes them", "[shard]") {
  std::mt19937 rng(7);
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    const std::vector<Index> shape = {static_cast<Index>(rng() % 11), 3,
                                      static_cast<Index>(rng() % 6)};
    std::vector<Placement> dims = {Shard(0), Replicate(), mesh.ndim() > 1 ? Shard(1) : Replicate()};
    std::vector<std::vector<Index>> sizes(3);
    sizes[0] = test::random_sizes(rng, shape[0], mesh.dim(0));
    if (dims[2].sharded()) sizes[2] = test::random_sizes(rng, shape[2], mesh.dim(1));
    const ShardSpec spec(shape, dims, mesh, {}, sizes);
    const Tensor ref = test::reference(shape, DType::f64, 1);
    const Tensor mine = ref.view(spec.local_box(mesh.coords())).clone();
    ShardTensor inferred = ShardTensor::from_local(mesh, mine, dims);
    MPI_REQUIRE(inferred.spec() == spec);
    ShardTensor given = ShardTensor::from_local(mesh, mine, dims, {}, sizes);
    MPI_REQUIRE(given.spec() == spec);
    MPI_REQUIRE(test::same(inferred.gather_all(), ref));
  }
}

TEST_CASE("Inconsistent local pieces fail on every rank", "[shard]") {
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  // Replicated dim 1 differs on the last rank.
  const Index w = mesh.rank() == mesh.size() - 1 && mesh.size() > 1 ? 4 : 3;
  std::string msg;
  try {
    ShardTensor::from_local(mesh, Tensor::zeros({2, w}, DType::f32), {Shard(0), Replicate()});
  } catch (const Error& e) {
    msg = e.what();
  }
  MPI_REQUIRE(mesh.size() == 1 || msg.find("dim 1 has extent") != std::string::npos);
  // A local tensor that does not match an explicit spec.
  msg.clear();
  const ShardSpec spec({8, 2}, {Shard(0), Replicate()}, mesh);
  const auto shape = mesh.rank() == 0 ? std::vector<Index>{99, 2} : spec.local_shape(mesh.coords());
  try {
    ShardTensor(mesh, spec, Tensor::zeros(shape, DType::f32));
  } catch (const Error& e) {
    msg = e.what();
  }
  MPI_REQUIRE(msg.find(std::string(mesh.size() == 1 ? "" : "rank 0: ") +
                       "ShardTensor: local tensor (99, 2)") != std::string::npos);
  // Root's tensor does not match the spec.
  msg.clear();
  try {
    ShardTensor::scatter(mesh, mesh.rank() == 0 ? Tensor::zeros({9, 2}, DType::f32) : Tensor(),
                         spec);
  } catch (const Error& e) {
    msg = e.what();
  }
  MPI_REQUIRE(msg.find("does not match spec") != std::string::npos);
}
