#pragma once
// Factorization of a rank count into a process grid for a given global shape, chosen
// to minimize the halo surface of the largest block (as heFFTe's proc_setup_min_surface).
#include <vector>

#include "decomp/box.hpp"

namespace tessera {

// Returns grid with one entry per entry of `shape`, product == nranks. Dims whose
// `splittable` flag is false (or that are shorter than the factor) get 1 where possible.
// Ties prefer splitting earlier (outer, row-major) dims: their faces are contiguous.
std::vector<int> min_surface_grid(int nranks, const std::vector<Index>& shape,
                                  const std::vector<bool>& splittable = {});

// The grid Mesh::for_grid uses: the one whose busiest block's halo exchange moves the fewest
// cache lines through memory (block_halo_lines), then the smallest surface. Packing a face
// across the unit-stride (last) dim touches one cache line per row of a few cells, so it
// costs up to 16 times the bytes it moves; on 256^3 over 8 ranks this picks 4x2x1 over the
// minimum-surface 2x2x2 (more bytes, all in long runs, faster to exchange: see README).
std::vector<int> min_halo_traffic_grid(int nranks, const std::vector<Index>& shape,
                                       const std::vector<bool>& splittable = {});

// Cache lines (64 bytes, 4-byte cells) the faces of the busiest block that border another
// block touch for a 1-cell halo: a face's rows times the lines per row, where a row runs
// along the last dim (one cell long for the face across it).
double block_halo_lines(const std::vector<Index>& shape, const std::vector<int>& grid);

// Halo surface of the busiest block `grid` gives for `shape`: the faces of its largest
// block that border another block (open boundaries, as in a non-periodic grid).
double block_surface(const std::vector<Index>& shape, const std::vector<int>& grid);

}  // namespace tessera
