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

// Halo surface of the busiest block `grid` gives for `shape`: the faces of its largest
// block that border another block (open boundaries, as in a non-periodic grid).
double block_surface(const std::vector<Index>& shape, const std::vector<int>& grid);

}  // namespace tessera
