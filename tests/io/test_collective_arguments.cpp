// Collective calls whose ranks pass different arguments (a root, a spec, an element type,
// halo widths, a dataset name, a checkpoint's tensors) end with the same tessera::Error on
// every rank, naming what differs and which ranks passed what, instead of hanging in the
// transfer or writing a file only some ranks meant (the file then holds one rank's name).
#include <complex>
#include <filesystem>

#include "io/checkpoint.hpp"
#include "io/file.hpp"
#include "io/sharded.hpp"
#include "runtime/comm/halo_exchange.hpp"
#include "runtime/tensor/shard_tensor.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/io_helpers.hpp"

using namespace tessera;

namespace {
int rank() {
  return test::world_rank();
}
int size() {
  return test::world_size();
}
}  // namespace

TEST_CASE("Mesh: ranks passing different axes are named", "[agreement]") {
  if (size() < 2) return;
  const std::vector<int> dims =
      rank() == 0 ? std::vector<int>{size(), 1} : std::vector<int>{1, size()};
  const std::string e = test::error_of([&] { Mesh m(MPI_COMM_WORLD, dims); });
  MPI_CHECK(
      test::has(e, "Mesh: ranks disagree on the axes: rank 0: " + std::to_string(size()) + "x1"));
  MPI_CHECK_ERROR(Mesh(MPI_COMM_NULL, {1}), "MPI_COMM_NULL");
}

TEST_CASE("ShardTensor: a spec or element type that differs is named", "[agreement]") {
  const Mesh mesh(MPI_COMM_WORLD, {size()});
  const ShardSpec spec({6, 4}, {Shard(0), Replicate()}, mesh);
  const DType dt = rank() == 0 ? DType::f32 : DType::f64;
  const Tensor local = Tensor::zeros(spec.local_shape(mesh.coords()), dt);
  if (size() > 1)
    MPI_CHECK_ERROR(ShardTensor(mesh, spec, local),
                    "ShardTensor: ranks disagree on the spec or element type: rank 0: ");
  // The same arguments everywhere: no error.
  MPI_CHECK(test::error_of([&] {
              ShardTensor(mesh, spec, Tensor::zeros(spec.local_shape(mesh.coords()), DType::f64));
            }).empty());
  MPI_CHECK_ERROR(ShardTensor().gather(), "default-constructed");
  // Default-constructed objects are named, not dereferenced (both segfaulted).
  MPI_CHECK_ERROR(ShardTensor().gather_all(), "ShardTensor::gather_all: the ShardTensor is empty");
  MPI_CHECK_ERROR(Mesh().ndim(), "Mesh: default-constructed, it spans no ranks");
  MPI_CHECK_ERROR(Mesh().comm(), "Mesh: default-constructed");
  MPI_CHECK_ERROR(Tensor().clone(), "undefined");
  MPI_CHECK_ERROR(Tensor::zeros({12}, DType::f32).reshape({-3, -4}), "negative extent");
  MPI_CHECK_ERROR(Mesh::for_grid(MPI_COMM_WORLD, {-4, 8}), "negative extent in grid (-4, 8)");
}

TEST_CASE("scatter and gather: a root that differs, or is not in the mesh", "[agreement]") {
  const Mesh mesh(MPI_COMM_WORLD, {size()});
  const Tensor full = test::reference({5, 3}, DType::f64);
  const ShardSpec spec({5, 3}, {Shard(0), Replicate()}, mesh);
  MPI_CHECK_ERROR(ShardTensor::scatter(mesh, full, spec, -1), "root -1 not in mesh");
  MPI_CHECK_ERROR(ShardTensor::scatter(mesh, full, {Shard(0), Replicate()}, size()), "not in mesh");
  const ShardTensor st = ShardTensor::scatter(mesh, full, spec, 0);
  MPI_CHECK(test::same(st.gather_all(), full));
  if (size() < 2) return;
  const int root = rank() == 1 ? 1 : 0;
  MPI_CHECK_ERROR(ShardTensor::scatter(mesh, full, spec, root),
                  "ShardTensor::scatter: ranks disagree on the root or spec: ");
  MPI_CHECK_ERROR(ShardTensor::scatter(mesh, full, {Shard(0), Replicate()}, root),
                  "ShardTensor::scatter: ranks disagree on the root: ");
  MPI_CHECK_ERROR(st.gather(root), "ShardTensor::gather: ranks disagree on the root: ");
}

TEST_CASE("redistribute: targets that differ are named, not waited on", "[agreement]") {
  const Mesh mesh(MPI_COMM_WORLD, {size()});
  const Tensor full = test::reference({7, 5}, DType::f64);
  const ShardTensor st = ShardTensor::scatter(mesh, full, {Shard(0), Replicate()});
  MPI_CHECK(test::same(st.redistribute({Replicate(), Shard(0)}).gather_all(), full));
  MPI_CHECK_ERROR(st.redistribute(ShardSpec({7, 6}, {Shard(0), Replicate()}, mesh)),
                  "redistribute: target global shape (7, 6) differs from (7, 5)");
  if (size() < 2) return;
  // Rank 0 alone asks for a gather (no transfer on its side would match the others'
  // all-to-all); then uneven sizes that differ between ranks.
  const std::vector<Placement> want = rank() == 0 ? std::vector<Placement>{Replicate(), Replicate()}
                                                  : std::vector<Placement>{Replicate(), Shard(0)};
  MPI_CHECK_ERROR(
      st.redistribute(want),
      "redistribute: ranks disagree on the layouts, element type or transport: rank 0: ");
  std::vector<Index> sizes(static_cast<std::size_t>(size()), 0);
  sizes[rank() == 1 ? 0 : static_cast<std::size_t>(size() - 1)] = 5;
  MPI_CHECK_ERROR(
      st.redistribute(ShardSpec({7, 5}, {Replicate(), Shard(0)}, mesh, {}, {{}, sizes})),
      "redistribute: ranks disagree");
}

TEST_CASE("HaloExchange: widths or periodic flags that differ are named", "[agreement]") {
  if (size() < 2) return;
  const Mesh mesh(MPI_COMM_WORLD, {size()});
  const ShardSpec spec({4 * size(), 3}, {Shard(0), Replicate()}, mesh);
  const Index w = rank() == 0 ? 2 : 1;
  MPI_CHECK_ERROR(HaloExchange(mesh, spec, {w, 0}, {w, 0}),
                  "HaloExchange: ranks disagree on the spec, widths, periodic flags or options");
  HaloOptions o;
  o.periodic = {rank() == 0, false};
  MPI_CHECK_ERROR(HaloExchange(mesh, spec, {1, 0}, {1, 0}, o), "ranks disagree");
  // A bad width on one rank only: its message, on every rank.
  const Index bad = rank() == 1 ? -1 : 1;
  MPI_CHECK_ERROR(HaloExchange(mesh, spec, {bad, 0}, {1, 0}), "check failed on 1 of");
  // A spec of another mesh (1 x N, where the spec's is N): named, not MPI_ERR_RANK.
  const Mesh other(MPI_COMM_WORLD, {1, size()});
  MPI_CHECK_ERROR(HaloExchange(other, spec, {1, 0}, {1, 0}),
                  "lays the tensor out over a mesh of 1 axes, not over mesh");
}

TEST_CASE("write_sharded and save_checkpoint: names or tensors that differ are refused",
          "[agreement]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const Mesh mesh(MPI_COMM_WORLD, {size()});
  const ShardTensor st = ShardTensor::scatter(mesh, test::reference({2 * size(), 3}, DType::f64),
                                              {Shard(0), Replicate()});
  const std::string path = test::temp_file(MPI_COMM_WORLD, "agreement");
  {
    io::File f = io::File::create(path, MPI_COMM_WORLD);
    if (size() > 1) {
      const std::string name = rank() == 1 ? "/v" : "/u";
      MPI_CHECK_ERROR(io::write_sharded(f, name, st),
                      "write_sharded: ranks disagree on the dataset, spec or element type: ");
      MPI_CHECK(!f.exists("/u") && !f.exists("/v"));  // nothing written
    }
    io::write_sharded(f, "/u", st);
    MPI_CHECK(f.exists("/u"));
    // A global shape with a zero extent: the dataset exists, shape and all, with no values.
    const ShardTensor none = ShardTensor::scatter(mesh, Tensor::zeros({2, 0, 3}, DType::f32),
                                                  {Shard(0), Replicate(), Replicate()});
    MPI_CHECK(test::error_of([&] { io::write_sharded(f, "/none", none); }).empty());
    MPI_CHECK(f.info("/none").shape == (std::vector<Index>{2, 0, 3}));
  }
  test::remove_file(MPI_COMM_WORLD, path);

  const std::string ck = test::temp_file(MPI_COMM_WORLD, "agreement-ckpt");
  io::Checkpoint c;
  c.params.push_back({"w", Tensor::zeros({rank() == 0 || size() == 1 ? 3 : 4}, DType::f32)});
  if (size() > 1) {
    MPI_CHECK_ERROR(io::save_checkpoint(ck, MPI_COMM_WORLD, c),
                    "save_checkpoint: ranks disagree on the tensors' names, shapes or types");
    MPI_CHECK(!std::filesystem::exists(ck) && !test::temp_output_left(ck));
  }
  io::Checkpoint undefined;
  undefined.params.push_back({"w", Tensor()});
  MPI_CHECK_ERROR(io::save_checkpoint(ck, MPI_COMM_WORLD, undefined), "tensor 'w' is undefined");
  // Two tensors of one name (HDF5's "name already exists" before), or a name HDF5 reads as
  // a path: refused by name, no file left.
  io::Checkpoint twice;
  twice.params = {{"w", Tensor::zeros({2}, DType::f32)}, {"w", Tensor::zeros({3}, DType::f32)}};
  MPI_CHECK_ERROR(io::save_checkpoint(ck, MPI_COMM_WORLD, twice),
                  "checkpoint: two tensors named 'w' in /params");
  io::Checkpoint dot;
  dot.buffers = {{".", Tensor::zeros({2}, DType::f32)}};
  MPI_CHECK_ERROR(io::save_checkpoint(ck, MPI_COMM_WORLD, dot), "(nor . or ..)");
  MPI_CHECK(!std::filesystem::exists(ck) && !test::temp_output_left(ck));
}
