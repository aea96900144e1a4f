// CUDA-against-CPU tests of the device paths. They skip, saying so, where no device
// exists (the CI machine builds the CUDA code but has no GPU).
#include <iostream>

#include "kernels/strided_copy.hpp"
#include "kernels/device/device.hpp"
#include "runtime/tensor/shard_tensor.hpp"
#include "tests/support/have_device.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"

using namespace tessera;

TEST_CASE("Host <-> device copies and strided device views", "[gpu]") {
  if (!test::have_device()) return;
  const Tensor ref = test::reference({6, 5, 4}, DType::f64);
  const Tensor d = ref.to(MemSpace::Cuda);
  MPI_REQUIRE(d.space() == MemSpace::Cuda);
  MPI_REQUIRE(test::same(d.to(MemSpace::Host), ref));
  const Box b({1, 0, 2}, {5, 3, 4});
  MPI_REQUIRE(test::same(d.view(b).clone().to(MemSpace::Host), ref.view(b)));
  MPI_REQUIRE(test::same(d.view(b).to(MemSpace::Host), ref.view(b)));
  Tensor z = ref.to(MemSpace::Cuda);
  z.view(b).zero();
  Tensor zh = ref.clone();
  zh.view(b).zero();
  MPI_REQUIRE(test::same(z.to(MemSpace::Host), zh));
}

TEST_CASE("Device redistribute equals host redistribute", "[gpu]") {
  if (!test::have_device()) return;
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const Tensor ref = test::reference({9, 7, 3}, DType::f32);
  const ShardTensor h = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(),
                                             {Shard(0), Replicate(), Replicate()});
  const ShardTensor d = ShardTensor::unchecked(mesh, h.spec(), h.local().to(MemSpace::Cuda));
  for (const auto& target : {std::vector<Placement>{Replicate(), Shard(0), Replicate()},
                             std::vector<Placement>{Replicate(), Replicate(), Replicate()}}) {
    const ShardTensor hy = h.redistribute(target), dy = d.redistribute(target);
    MPI_REQUIRE(dy.local().space() == MemSpace::Cuda);
    MPI_REQUIRE(test::same(dy.local().to(MemSpace::Host), hy.local()));
  }
}
