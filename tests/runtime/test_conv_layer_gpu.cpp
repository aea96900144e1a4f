// Sharded conv and transposed-conv layers on device memory (cuDNN kernels, device halo
// exchange) against the same layers on host memory on one rank. Skip, saying so, where
// no device exists.
#include <iostream>

#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/conv_transpose_layer.hpp"
#include "kernels/device/device.hpp"
#include "tests/support/have_device.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/layer_check.hpp"

using namespace tessera;

namespace {
ShardSpec spatial_spec(const Mesh& mesh, const std::vector<Index>& shape) {
  std::vector<Placement> dims(shape.size(), Replicate());
  for (int a = 0; a < mesh.ndim() && 2 + a < static_cast<int>(shape.size()); ++a)
    dims[2 + a] = Shard(a);
  return ShardSpec(shape, dims, mesh);
}
}  // namespace

TEST_CASE("Device conv layers equal host conv layers", "[gpu]") {
  if (!test::have_device()) return;
  int checked = 0;
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (DType dt : {DType::f32, DType::f64}) {
      const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
      for (int variant = 0; variant < 3; ++variant) {
        ConvOptions o;
        o.nd = 2;
        o.in_channels = 4;
        o.out_channels = 6;
        o.kernel = {variant == 1 ? 4 : 3};
        o.stride = {variant == 0 ? 2 : 1};
        o.padding = {1};
        o.padding_mode = variant == 2 ? PaddingMode::Circular : PaddingMode::Zeros;
        o.groups = variant == 2 ? 2 : 1;
        o.overlap = variant == 1;
        o.dtype = dt;
        ConvOptions host = o;
        o.space = MemSpace::Cuda;
        const ShardSpec spec = spatial_spec(mesh, {2, 4, 17, 13});
        const auto cmp = test::compare_with_one_rank(
            mesh, spec, [&] { return std::make_unique<ConvNd>(o); }, dt, MemSpace::Cuda, 11,
            [&] { return std::make_unique<ConvNd>(host); }, MemSpace::Host);
        INFO("conv variant " << variant << " " << name_of(dt) << " " << mesh.str() << ": "
                             << cmp.str());
        MPI_CHECK(cmp.worst() <= tol);
        ++checked;
      }
      ConvTransposeOptions t;
      t.nd = 3;
      t.in_channels = 2;
      t.out_channels = 4;
      t.kernel = {4};
      t.stride = {2};
      t.padding = {1};
      t.dtype = dt;
      ConvTransposeOptions host = t;
      t.space = MemSpace::Cuda;
      const ShardSpec spec = spatial_spec(mesh, {1, 2, 5, 6, 4});
      const auto cmp = test::compare_with_one_rank(
          mesh, spec, [&] { return std::make_unique<ConvTransposeNd>(t); }, dt, MemSpace::Cuda, 12,
          [&] { return std::make_unique<ConvTransposeNd>(host); }, MemSpace::Host);
      INFO("transposed conv " << name_of(dt) << " " << mesh.str() << ": " << cmp.str());
      MPI_CHECK(cmp.worst() <= tol);
      ++checked;
    }
  }
  MPI_REQUIRE(checked > 0);
}
