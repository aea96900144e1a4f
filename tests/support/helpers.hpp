#pragma once
// Shared helpers of the MPI tests: deterministic reference tensors every rank can
// build in full, exact comparison, and the meshes to run each case on.
#include <cstring>
#include <random>
#include <vector>

#include "decomp/grid_factor.hpp"
#include "runtime/tensor/mesh.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::test {

// Cell value from its global linear index: exact in float64 and int64.
inline Tensor reference(const std::vector<Index>& shape, DType dt, int seed = 0) {
  Tensor t = Tensor::empty(shape, dt);
  for (Index i = 0; i < t.numel(); ++i) {
    const Index v = i * 3 + seed;
    if (dt == DType::f64)
      t.data<double>()[i] = static_cast<double>(v) * 0.5;
    else if (dt == DType::f32)
      t.data<float>()[i] = static_cast<float>(v % 100000) * 0.25f;
    else
      t.data<std::int64_t>()[i] = v;
  }
  return t;
}

// Bitwise equality of two host tensors of equal shape (views allowed).
inline bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.numel() == 0 || std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

// 1-D, 2-D and 3-D meshes over all ranks (axes of size 1 included where P is prime).
inline std::vector<Mesh> test_meshes(MPI_Comm comm) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<Mesh> m;
  m.push_back(Mesh(comm, {P}, {"domain"}));
  m.push_back(Mesh(comm, min_surface_grid(P, {16, 16}), {"x", "y"}));
  m.push_back(Mesh(comm, min_surface_grid(P, {16, 16, 16}), {"x", "y", "z"}));
  if (P % 2 == 0) m.push_back(Mesh(comm, {P / 2, 2}, {"domain", "data"}));
  return m;
}

// Random explicit sizes of `n` cells over `parts` shards (zeros allowed); the same on
// every rank for the same rng state.
inline std::vector<Index> random_sizes(std::mt19937& rng, Index n, int parts) {
  std::vector<Index> s(parts, 0);
  for (Index c = 0; c < n; ++c) ++s[rng() % parts];
  return s;
}

}  // namespace tessera::test
