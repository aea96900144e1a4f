// The halo exchange on device memory (one pack kernel and one unpack kernel over all
// regions, device pointers to CUDA-aware MPI or host staging) against the same exchange
// on host memory: forward fill and adjoint add, bit for bit in the deterministic order.
// Skips, saying so, where no device exists.
#include <iostream>
#include <random>

#include "runtime/tensor/context.hpp"
#include "kernels/device/device.hpp"
#include "runtime/comm/halo_exchange.hpp"
#include "tests/support/have_device.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"

using namespace tessera;

namespace {
struct Case {
  std::vector<Index> shape, left, right;
  std::vector<bool> periodic;
};
}  // namespace

TEST_CASE("Device halo exchange equals the host exchange, forward and adjoint", "[gpu]") {
  if (!test::have_device()) return;
  const std::vector<Case> cases = {
      {{9, 7, 5}, {1, 1, 1}, {1, 1, 1}, {false, false, false}},
      {{8, 6, 10}, {2, 0, 3}, {1, 2, 0}, {true, false, true}},
      {{3, 4, 4}, {3, 2, 1}, {2, 3, 1}, {true, true, false}},  // wider than thin shards
  };
  std::mt19937 rng(3 + test::world_rank());
  std::uniform_real_distribution<double> u(-1, 1);
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (const Case& c : cases) {
      std::vector<Placement> dims(3, Replicate());
      for (int a = 0; a < mesh.ndim() && a < 3; ++a)
        if (mesh.names()[a] != "data") dims[a] = Shard(a);
      const ShardSpec spec(c.shape, dims, mesh);
      HaloOptions o;
      o.periodic = c.periodic;
      o.deterministic = true;
      HaloExchange ex(mesh, spec, c.left, c.right, o);
      for (DType dt : {DType::f32, DType::f64}) {
        HaloTensor h(mesh, spec, c.left, c.right, dt),
            d(mesh, spec, c.left, c.right, dt, MemSpace::Cuda);
        Tensor v = Tensor::empty(h.padded().shape(), DType::f64);
        for (Index i = 0; i < v.numel(); ++i) v.data<double>()[i] = u(rng);
        Tensor vt = Tensor::empty(v.shape(), dt);
        for (Index i = 0; i < v.numel(); ++i) {
          if (dt == DType::f32)
            vt.data<float>()[i] = static_cast<float>(v.data<double>()[i]);
          else
            vt.data<double>()[i] = v.data<double>()[i];
        }
        for (bool adjoint : {false, true}) {
          h.padded().copy_from(vt);
          d.padded().copy_from(vt);
          if (adjoint) {
            ex.exchange_adjoint(h);
            ex.exchange_adjoint(d);
          } else {
            ex.exchange(h);
            ex.exchange(d);
          }
          INFO("mesh " << mesh.str() << " shape " << shape_str(c.shape) << " " << name_of(dt)
                       << (adjoint ? " adjoint" : " forward"));
          MPI_REQUIRE(test::same(d.padded().to(MemSpace::Host), h.padded()));
        }
      }
    }
  }
}
