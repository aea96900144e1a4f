#pragma once
// The layouts the whole-model tests run a 2-D (N, C, H, W) input on: H sharded over the
// world, and with an even world of 4 ranks or more a 2 x n/2 spatial grid and an n/2 x 2
// domain x data mesh.
#include <utility>
#include <vector>

#include "runtime/tensor/shard_tensor.hpp"
#include "tests/harness/mpi_test.hpp"

namespace tessera::test {

inline std::vector<std::pair<Mesh, std::vector<Placement>>> grid_layouts() {
  const int n = world_size();
  std::vector<std::pair<Mesh, std::vector<Placement>>> out;
  std::vector<Placement> slab = {Replicate(), Replicate(), Shard(0), Replicate()};
  out.emplace_back(Mesh::line(MPI_COMM_WORLD), slab);
  if (n % 2 == 0 && n > 2) {
    std::vector<Placement> grid = slab;
    grid[3] = Shard(1);
    out.emplace_back(Mesh(MPI_COMM_WORLD, {2, n / 2}, {"y", "x"}), grid);
    std::vector<Placement> dd = slab;
    dd[0] = Shard(1);
    out.emplace_back(Mesh(MPI_COMM_WORLD, {n / 2, 2}, {"domain", "data"}), dd);
  }
  return out;
}

}  // namespace tessera::test
