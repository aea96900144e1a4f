#pragma once
// BlockPartition: a Cartesian split of an N-d box over a process grid. Each dim d is
// cut at offsets[d][0..grid[d]], so ownership is a product of 1-D splits; uneven
// (and empty) blocks are first class.
#include <vector>

#include "decomp/box.hpp"

namespace tessera {

// Balanced 1-D split of n cells into p parts: the first n % p parts get one more.
std::vector<Index> balanced_sizes(Index n, int p);

class BlockPartition {
 public:
  BlockPartition() = default;
  // Balanced split of `domain` over `grid` (one entry per dim; 1 = not split).
  BlockPartition(const Box& domain, const std::vector<int>& grid);
  // Explicit sizes per dim: sizes[d] has grid[d] entries summing to domain.extent(d).
  BlockPartition(const Box& domain, const std::vector<std::vector<Index>>& sizes);

  const Box& domain() const { return domain_; }
  int ndim() const { return domain_.ndim; }
  const std::vector<int>& grid() const { return grid_; }
  int num_blocks() const;
  const std::vector<Index>& offsets(int d) const { return offsets_[d]; }
  std::vector<Index> sizes(int d) const;

  // Block at grid coordinates, or at the row-major block id.
  Box block(const std::vector<int>& coords) const;
  Box block(int id) const { return block(coords_of(id)); }
  std::vector<int> coords_of(int id) const;
  int id_of(const std::vector<int>& coords) const;

  // Grid coordinates of the block owning global point p (which must lie in the domain).
  std::vector<int> owner_coords(const Index* p) const;
  int owner(const Index* p) const { return id_of(owner_coords(p)); }
  // Coordinate range [first, last] along dim d of blocks that intersect [lo, hi).
  void blocks_overlapping(int d, Index lo, Index hi, int& first, int& last) const;

  bool operator==(const BlockPartition& o) const {
    return domain_ == o.domain_ && grid_ == o.grid_ && offsets_ == o.offsets_;
  }

 private:
  Box domain_;
  std::vector<int> grid_;
  std::vector<std::vector<Index>> offsets_;  // per dim, grid[d] + 1 cut points
};

}  // namespace tessera
