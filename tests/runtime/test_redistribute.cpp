#include <sstream>

#include "runtime/tensor/shard_tensor.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"

using namespace tessera;

namespace {
// Every spec of a rank-3 tensor on `mesh` without Partial: each mesh axis shards one
// of the 3 dims or none.
std::vector<std::vector<Placement>> all_placements(const Mesh& mesh) {
  std::vector<std::vector<Placement>> out;
  const int na = mesh.ndim();
  std::vector<int> choice(na, 0);  // 0..3: dim or none
  while (true) {
    std::vector<Placement> p(3);
    bool ok = true;
    for (int a = 0; a < na; ++a) {
      if (choice[a] == 3) continue;
      ok = ok && !p[choice[a]].sharded();
      p[choice[a]] = Shard(a);
    }
    if (ok) out.push_back(p);
    int a = 0;
    while (a < na && ++choice[a] == 4) choice[a++] = 0;
    if (a == na) break;
  }
  return out;
}

std::string str(const std::vector<Placement>& p) {
  std::ostringstream os;
  for (auto x : p) {
    if (x.sharded())
      os << 'S' << x.axis << ' ';
    else
      os << "R ";
  }
  return os.str();
}
}  // namespace

TEST_CASE("Every redistribute pair equals its serial definition and round-trips",
          "[redistribute]") {
  std::mt19937 rng(3);
  int pairs = 0;
  std::vector<Mesh> meshes = test::test_meshes(MPI_COMM_WORLD);
  meshes.resize(std::min<std::size_t>(meshes.size(), 2));  // 1-D and 2-D: every pair
  if (test::world_size() % 2 == 0) meshes.push_back(test::test_meshes(MPI_COMM_WORLD).back());
  for (const Mesh& mesh : meshes) {
    const std::vector<Index> shape = {static_cast<Index>(3 + rng() % 6),
                                      static_cast<Index>(1 + rng() % 7),
                                      static_cast<Index>(rng() % 5)};
    const Tensor ref = test::reference(shape, DType::i64, 5);
    const auto specs = all_placements(mesh);
    for (const auto& a : specs) {
      const ShardTensor x = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), a);
      for (const auto& b : specs) {
        for (Transport m : {Transport::InPlace, Transport::Packed}) {
          INFO("mesh " << mesh.str() << ": " << str(a) << "-> " << str(b) << " method "
                       << static_cast<int>(m));
          const ShardTensor y = x.redistribute(b, {}, m);
          MPI_REQUIRE(y.spec() == ShardSpec(shape, b, mesh));
          MPI_REQUIRE(test::same(y.local(), ref.view(y.local_box())));
          const ShardTensor z = y.redistribute(a, {}, m);
          MPI_REQUIRE(test::same(z.local(), x.local()));
          ++pairs;
        }
      }
    }
  }
  MPI_REQUIRE(pairs > 0);
}

TEST_CASE("Redistribute between uneven explicit sizes and float64", "[redistribute]") {
  std::mt19937 rng(9);
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const int P = mesh.size();
  for (int trial = 0; trial < 10; ++trial) {
    const std::vector<Index> shape = {static_cast<Index>(rng() % 13), static_cast<Index>(rng() % 9),
                                      2};
    const Tensor ref = test::reference(shape, DType::f64, trial);
    const ShardSpec a(shape, {Shard(0), Replicate(), Replicate()}, mesh, {},
                      {test::random_sizes(rng, shape[0], P), {}, {}});
    const ShardSpec b(shape, {Replicate(), Shard(0), Replicate()}, mesh, {},
                      {{}, test::random_sizes(rng, shape[1], P), {}});
    const ShardSpec c(shape, {Shard(0), Replicate(), Replicate()}, mesh, {},
                      {test::random_sizes(rng, shape[0], P), {}, {}});  // re-balance on one axis
    const ShardTensor x = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), a);
    for (const ShardSpec* t : {&b, &c}) {
      const ShardTensor y = x.redistribute(*t);
      MPI_REQUIRE(y.spec() == *t);
      MPI_REQUIRE(test::same(y.local(), ref.view(y.local_box())));
      MPI_REQUIRE(test::same(y.redistribute(a).local(), x.local()));
    }
  }
}

TEST_CASE("Partial -> Replicate is the sum; Partial -> Shard is the sum's shard",
          "[redistribute]") {
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    const int pa = mesh.ndim() - 1;  // the partial axis
    const int n = mesh.dim(pa);
    const std::vector<Index> shape = {5, 7, 3};
    const Tensor ref = test::reference(shape, DType::i64, 2);
    // Addend at coordinate k along the partial axis: ref * (k + 1); the sum is ref * n(n+1)/2.
    std::vector<Placement> dims = {Replicate(), Replicate(), Replicate()};
    if (mesh.ndim() > 1) dims[0] = Shard(0);
    const ShardSpec spec(shape, dims, mesh, {pa});
    const Box mine = spec.local_box(mesh.coords());
    Tensor addend = ref.view(mine).clone();
    for (Index i = 0; i < addend.numel(); ++i)
      addend.data<std::int64_t>()[i] *= mesh.coords()[pa] + 1;
    const ShardTensor p(mesh, spec, addend);
    Tensor expect = ref.clone();
    for (Index i = 0; i < expect.numel(); ++i) expect.data<std::int64_t>()[i] *= n * (n + 1) / 2;

    const ShardTensor r = p.redistribute(dims);
    MPI_REQUIRE(!r.spec().has_partial());
    MPI_REQUIRE(test::same(r.local(), expect.view(r.local_box())));
    std::vector<Placement> sd = dims;
    sd[1] = Shard(pa);
    const ShardTensor s = p.redistribute(sd);
    MPI_REQUIRE(test::same(s.local(), expect.view(s.local_box())));
    MPI_REQUIRE(test::same(p.gather_all(), expect));
    // Replicate -> Partial -> Replicate is the identity.
    const ShardTensor back = r.redistribute(dims, {pa}).redistribute(dims);
    MPI_REQUIRE(test::same(back.local(), r.local()));
  }
}

TEST_CASE("Redistribute rejects bf16 sums and mismatched targets", "[redistribute]") {
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const ShardSpec spec({4}, {Replicate()}, mesh, {0});
  const ShardTensor p(mesh, spec, Tensor::zeros({4}, DType::bf16));
  std::string msg;
  try {
    p.redistribute({Replicate()});
  } catch (const Error& e) {
    msg = e.what();
  }
  MPI_REQUIRE(msg.find("bfloat16") != std::string::npos);
  msg.clear();
  try {
    p.redistribute(ShardSpec({5}, {Replicate()}, mesh));
  } catch (const Error& e) {
    msg = e.what();
  }
  MPI_REQUIRE(msg.find("global shape") != std::string::npos);
}
