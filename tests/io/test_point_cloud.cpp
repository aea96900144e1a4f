// io::read_point_cloud: each rank reads a contiguous range, the ranks lay the cloud out by RCB
// together and the points migrate to their owners - every point owned exactly once, in its
// owner's region, with its own coordinates, features and global index; the reverse migration
// gives back the read ranges. At 1-4 ranks, on a clustered cloud with duplicates.
#include <cstdlib>
#include <filesystem>
#include <random>

#include "io/point_cloud.hpp"
#include "io/schema.hpp"
#include "io/sharded.hpp"
#include "io/transfer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/random_tensor.hpp"

using namespace tessera;

TEST_CASE("read_point_cloud lays a cloud out by RCB with every point owned once") {
  MPI_Comm comm = test::harness_comm();
  int P = 1, me = 0;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &me);
  const char* t = std::getenv("TESSERA_TEST_TMPDIR");
  const std::string dir = std::string(t ? t : "/tmp") + "/point-cloud-np" + std::to_string(P);
  if (me == 0) std::filesystem::create_directories(dir);
  MPI_Barrier(comm);
  const std::string path = dir + "/cloud.h5";
  const Index N = 2, n = 101;
  // Every rank builds the whole cloud: half the points in a small cluster, some duplicated.
  Tensor xyz = test::random_tensor({N, n, 3}, DType::f32, 3);
  for (Index i = 0; i < N * n * 3; ++i)
    if ((i / 3) % 2 == 0) xyz.data<float>()[i] = 0.5f + 0.01f * xyz.data<float>()[i];
  for (Index i = 0; i + 3 < N * n; i += 9)
    for (int c = 0; c < 3; ++c) xyz.data<float>()[(i + 1) * 3 + c] = xyz.data<float>()[i * 3 + c];
  Tensor feat = Tensor::empty({N, n, 2}, DType::f32);
  for (Index i = 0; i < N * n; ++i)
    feat.data<float>()[i * 2] = static_cast<float>(i), feat.data<float>()[i * 2 + 1] = -1.0f;
  {
    io::File f = io::File::create(path, comm);
    io::schema::write_root(f, "test_point_cloud");
    for (const auto& [dset, v] :
         {std::pair{io::schema::kCoords, xyz}, std::pair{io::schema::kFeatures, feat}}) {
      f.create_dataset(dset, v.shape(), DType::f32);
      const Box all = me == 0 ? Box::from_shape(v.shape()) : Box({0, 0, 0}, {0, 0, 0});
      io::write_box(f, dset, all, v, all);
    }
  }
  MPI_Barrier(comm);
  const io::File f = io::File::open(path, comm);
  const Index sample = 1;
  const io::PointCloudShard s = io::read_point_cloud(f, sample, comm);
  const Index mine = s.ids.numel();
  Index total = mine;
  double idsum = 0;
  bool exact = true, inside = true;
  for (Index i = 0; i < mine; ++i) {
    const std::int64_t id = s.ids.data<std::int64_t>()[i];
    idsum += static_cast<double>(id);
    Point3 p;
    for (int c = 0; c < 3; ++c) {
      p[static_cast<std::size_t>(c)] = s.coords.data<double>()[i * 3 + c];
      exact = exact && s.coords.data<double>()[i * 3 + c] ==
                           static_cast<double>(xyz.data<float>()[(sample * n + id) * 3 + c]);
    }
    exact = exact && s.features.data<double>()[i * 2] == static_cast<double>(sample * n + id);
    inside = inside && s.layout.owner_of(p) == me;
  }
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, &idsum, 1, MPI_DOUBLE, MPI_SUM, comm);
  MPI_CHECK(total == n);
  MPI_CHECK(idsum == static_cast<double>(n * (n - 1) / 2));
  MPI_CHECK(exact);
  MPI_CHECK(inside);
  const Tensor back = s.migration.reverse(s.ids);
  const auto [b, e] = io::balanced_range(n, P, me);
  bool order = back.numel() == e - b;
  for (Index i = 0; order && i < back.numel(); ++i) order = back.data<std::int64_t>()[i] == b + i;
  MPI_CHECK(order);
}
