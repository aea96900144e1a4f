#include "decomp/partition.hpp"

#include <algorithm>
#include <numeric>

#include "decomp/error.hpp"

namespace tessera {

std::vector<Index> balanced_sizes(Index n, int p) {
  if (p <= 0) throw Error("balanced_sizes: part count must be positive, got " + std::to_string(p));
  if (n < 0) throw Error("balanced_sizes: negative extent " + std::to_string(n));
  std::vector<Index> s(p, n / p);
  for (Index i = 0; i < n % p; ++i) ++s[i];
  return s;
}

namespace {
std::vector<std::vector<Index>> balanced_all(const Box& domain, const std::vector<int>& grid) {
  if (static_cast<int>(grid.size()) != domain.ndim)
    throw Error("BlockPartition: grid has " + std::to_string(grid.size()) + " dims, domain " +
                std::to_string(domain.ndim));
  std::vector<std::vector<Index>> sizes;
  for (int d = 0; d < domain.ndim; ++d) sizes.push_back(balanced_sizes(domain.extent(d), grid[d]));
  return sizes;
}
}  // namespace

BlockPartition::BlockPartition(const Box& domain, const std::vector<int>& grid)
    : BlockPartition(domain, balanced_all(domain, grid)) {}

BlockPartition::BlockPartition(const Box& domain, const std::vector<std::vector<Index>>& sizes)
    : domain_(domain) {
  if (static_cast<int>(sizes.size()) != domain.ndim)
    throw Error("BlockPartition: sizes given for " + std::to_string(sizes.size()) +
                " dims, domain has " + std::to_string(domain.ndim));
  for (int d = 0; d < domain.ndim; ++d) {
    const auto& s = sizes[d];
    if (s.empty()) throw Error("BlockPartition: no sizes for dim " + std::to_string(d));
    std::vector<Index> off(s.size() + 1, domain.lo[d]);
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] < 0) throw Error("BlockPartition: negative size in dim " + std::to_string(d));
      off[i + 1] = off[i] + s[i];
    }
    if (off.back() != domain.hi[d])
      throw Error("BlockPartition: sizes of dim " + std::to_string(d) + " sum to " +
                  std::to_string(off.back() - domain.lo[d]) + ", extent is " +
                  std::to_string(domain.extent(d)));
    grid_.push_back(static_cast<int>(s.size()));
    offsets_.push_back(std::move(off));
  }
}

int BlockPartition::num_blocks() const {
  return std::accumulate(grid_.begin(), grid_.end(), 1, std::multiplies<int>());
}

std::vector<Index> BlockPartition::sizes(int d) const {
  std::vector<Index> s(grid_[d]);
  for (int i = 0; i < grid_[d]; ++i) s[i] = offsets_[d][i + 1] - offsets_[d][i];
  return s;
}

Box BlockPartition::block(const std::vector<int>& coords) const {
  if (static_cast<int>(coords.size()) != ndim())
    throw Error("BlockPartition::block: rank mismatch");
  Box b;
  b.ndim = ndim();
  for (int d = 0; d < ndim(); ++d) {
    if (coords[d] < 0 || coords[d] >= grid_[d])
      throw Error("BlockPartition::block: coordinate " + std::to_string(coords[d]) +
                  " out of range in dim " + std::to_string(d));
    b.lo[d] = offsets_[d][coords[d]];
    b.hi[d] = offsets_[d][coords[d] + 1];
  }
  return b;
}

std::vector<int> BlockPartition::coords_of(int id) const {
  if (id < 0 || id >= num_blocks())
    throw Error("BlockPartition: block id " + std::to_string(id) + " out of range");
  std::vector<int> c(ndim());
  for (int d = ndim() - 1; d >= 0; --d) {
    c[d] = id % grid_[d];
    id /= grid_[d];
  }
  return c;
}

int BlockPartition::id_of(const std::vector<int>& coords) const {
  int id = 0;
  for (int d = 0; d < ndim(); ++d) id = id * grid_[d] + coords[d];
  return id;
}

std::vector<int> BlockPartition::owner_coords(const Index* p) const {
  if (!domain_.contains(p)) throw Error("BlockPartition::owner: point outside the domain");
  std::vector<int> c(ndim());
  for (int d = 0; d < ndim(); ++d) {
    const auto& off = offsets_[d];
    // Last cut <= p; empty blocks share a cut with their successor, upper_bound skips them.
    c[d] = static_cast<int>(std::upper_bound(off.begin(), off.end(), p[d]) - off.begin()) - 1;
  }
  return c;
}

void BlockPartition::blocks_overlapping(int d, Index lo, Index hi, int& first, int& last) const {
  const auto& off = offsets_[d];
  first = static_cast<int>(std::upper_bound(off.begin(), off.end(), lo) - off.begin()) - 1;
  first = std::max(first, 0);
  last = static_cast<int>(std::lower_bound(off.begin(), off.end(), hi) - off.begin()) - 1;
  last = std::min(last, grid_[d] - 1);
}

}  // namespace tessera
