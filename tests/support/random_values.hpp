#pragma once
// Seeded uniform host vectors for the kernel tests (no runtime types, so tests of the
// kernels room can use it without MPI).
#include <cstddef>
#include <random>
#include <vector>

namespace tessera::test {

// n uniform values in [-1, 1) drawn as doubles from std::mt19937(seed), stored as T.
template <class T = double>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(g));
  return v;
}

}  // namespace tessera::test
