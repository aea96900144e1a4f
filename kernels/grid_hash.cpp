// The grid hash's build (a counting sort of the points by cell, on the host) and the entry
// points that dispatch the queries to the host loops or the CUDA kernels.
#include "kernels/grid_hash.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "decomp/error.hpp"
#include "kernels/device/memory.hpp"
#include "kernels/grid_hash_impl.hpp"

namespace tessera::kernels {
namespace {

// Cells of side `cell` over the extents `ext` (at least one per dim).
Index cells_along(double ext, double cell) {
  return std::max<Index>(1, static_cast<Index>(std::floor(ext / cell)) + 1);
}

}  // namespace

GridHash::GridHash(const double* xyz, const std::int64_t* ids, Index n, MemSpace space,
                   double per_cell)
    : space_(space) {
  TESSERA_CHECK(n >= 0 && (n == 0 || (xyz && ids)), "GridHash: " << n << " points without data");
  TESSERA_CHECK(per_cell > 0, "GridHash: " << per_cell << " points per cell");
  GridView& g = view_;
  g.n = n;
  double hi[3] = {0, 0, 0};
  for (int d = 0; d < 3; ++d) g.lo[d] = hi[d] = n > 0 ? xyz[d] : 0;
  for (Index i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) {
      const double x = xyz[3 * i + d];
      TESSERA_CHECK(std::isfinite(x), "GridHash: point " << i << " has a non-finite coordinate");
      g.lo[d] = std::min(g.lo[d], x);
      hi[d] = std::max(hi[d], x);
    }
  // Cells of equal side holding about per_cell points over the extents that are not flat
  // (a plane of points gets a 2-D grid), at most 4n + 8 cells in all.
  double volume = 1;
  int spread = 0;
  double widest = 0;
  for (int d = 0; d < 3; ++d) {
    const double e = hi[d] - g.lo[d];
    widest = std::max(widest, e);
    if (e > 0) volume *= e, ++spread;
  }
  g.cell = widest > 0 ? std::pow(volume * per_cell / static_cast<double>(std::max<Index>(n, 1)),
                                 1.0 / spread)
                      : 1.0;
  if (!(g.cell > 0) || !std::isfinite(g.cell)) g.cell = widest > 0 ? widest : 1.0;
  auto total = [&] {
    double t = 1;
    for (int d = 0; d < 3; ++d) t *= static_cast<double>(cells_along(hi[d] - g.lo[d], g.cell));
    return t;
  };
  while (total() > 4.0 * static_cast<double>(n) + 8) g.cell *= 1.25;
  for (int d = 0; d < 3; ++d) g.dims[d] = cells_along(hi[d] - g.lo[d], g.cell);
  const Index ncells = g.dims[0] * g.dims[1] * g.dims[2];

  // Counting sort by cell; within a cell, rows in their input order.
  std::vector<Index> start(static_cast<std::size_t>(ncells) + 1, 0),
      order(static_cast<std::size_t>(n));
  std::vector<Index> cell_of(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) {
    const double* p = xyz + 3 * i;
    const Index c = (grid_cell(g, 2, p[2]) * g.dims[1] + grid_cell(g, 1, p[1])) * g.dims[0] +
                    grid_cell(g, 0, p[0]);
    cell_of[static_cast<std::size_t>(i)] = c;
    ++start[static_cast<std::size_t>(c) + 1];
  }
  for (Index c = 0; c < ncells; ++c)
    start[static_cast<std::size_t>(c) + 1] += start[static_cast<std::size_t>(c)];
  std::vector<Index> fill(start.begin(), start.end() - 1);
  for (Index i = 0; i < n; ++i)
    order[static_cast<std::size_t>(
        fill[static_cast<std::size_t>(cell_of[static_cast<std::size_t>(i)])]++)] = i;

  if (space_ == MemSpace::Host) row_ids_.assign(ids, ids + n);
  // The arrays in the chosen memory space.
  auto place = [&](const void* src, std::size_t bytes) -> void* {
    void* p = mem_alloc(space_, std::max<std::size_t>(bytes, 8));
    owned_.push_back(p);
    owned_bytes_.push_back(std::max<std::size_t>(bytes, 8));
    if (bytes == 0) return p;
    if (space_ == MemSpace::Host)
      std::memcpy(p, src, bytes);
    else
      device::copy(p, src, bytes, device::Copy::HostToDevice);
    return p;
  };
  g.cell_start = static_cast<const Index*>(place(start.data(), start.size() * sizeof(Index)));
  g.order = static_cast<const Index*>(place(order.data(), order.size() * sizeof(Index)));
  std::vector<double> sorted_xyz(static_cast<std::size_t>(3 * n));
  std::vector<std::int64_t> sorted_ids(static_cast<std::size_t>(n));
  for (Index t = 0; t < n; ++t) {
    const auto row = static_cast<std::size_t>(order[static_cast<std::size_t>(t)]);
    std::copy_n(xyz + 3 * row, 3, sorted_xyz.begin() + 3 * t);
    sorted_ids[static_cast<std::size_t>(t)] = ids[row];
  }
  g.xyz = static_cast<const double*>(place(sorted_xyz.data(), sorted_xyz.size() * sizeof(double)));
  g.ids = static_cast<const std::int64_t*>(
      place(sorted_ids.data(), sorted_ids.size() * sizeof(std::int64_t)));
}

namespace {
std::vector<Neighbor> neighbors_of(const std::vector<std::int64_t>& row_ids, const Index* idx,
                                   const double* d2, Index count) {
  std::vector<Neighbor> out(static_cast<std::size_t>(count));
  for (std::size_t j = 0; j < out.size(); ++j)
    out[j] = {d2[j], row_ids[static_cast<std::size_t>(idx[j])], idx[j]};
  return out;
}

// Per-thread candidate buffers of the host queries, grown as needed and kept: a query
// allocates only its result list.
struct QueryScratch {
  std::vector<Index> idx;
  std::vector<double> d2;
  void fit(Index n) {
    const auto m = static_cast<std::size_t>(std::max<Index>(n, 1));
    if (idx.size() < m) idx.resize(m), d2.resize(m);
  }
};
thread_local QueryScratch scratch;
}  // namespace

std::vector<Neighbor> GridHash::knn(const double q[3], Index k) const {
  TESSERA_CHECK(space_ == MemSpace::Host, "GridHash::knn: the grid is in device memory");
  const Index m = std::max<Index>(0, std::min(k, view_.n));
  scratch.fit(m);
  Index count = 0;
  GridKnnQuery{view_, q, m, scratch.idx.data(), scratch.d2.data(), &count}(0);
  return neighbors_of(row_ids_, scratch.idx.data(), scratch.d2.data(), count);
}

std::vector<Neighbor> GridHash::within(const double q[3], double r2, Index max_points) const {
  TESSERA_CHECK(space_ == MemSpace::Host, "GridHash::within: the grid is in device memory");
  Index cap = max_points;
  if (cap <= 0) GridWithinQuery{view_, q, r2, 0, nullptr, nullptr, &cap}(0);  // all of them
  cap = std::min(cap, view_.n);
  scratch.fit(cap);
  Index count = 0;
  if (cap > 0) GridWithinQuery{view_, q, r2, cap, scratch.idx.data(), scratch.d2.data(), &count}(0);
  return neighbors_of(row_ids_, scratch.idx.data(), scratch.d2.data(), count);
}

GridHash::~GridHash() {
  for (std::size_t i = 0; i < owned_.size(); ++i) mem_free(space_, owned_[i], owned_bytes_[i]);
}

void grid_knn(const Device& dev, const GridView& g, const double* q, Index nq, Index k, Index* idx,
              double* d2, Index* count) {
  TESSERA_CHECK(nq >= 0 && k >= 0, "grid_knn: " << nq << " queries, k = " << k);
  if (dev.is_host()) return cpu::grid_knn(g, q, nq, k, idx, d2, count);
  if constexpr (kCudaEnabled) return cuda::grid_knn(dev, g, q, nq, k, idx, d2, count);
  throw_without_cuda("grid_knn");
}

void grid_within(const Device& dev, const GridView& g, const double* q, Index nq, double r2,
                 Index max_points, Index* idx, double* d2, Index* count) {
  TESSERA_CHECK(nq >= 0 && max_points >= 1,
                "grid_within: " << nq << " queries, max_points = " << max_points
                                << " (grid_count_within sizes an uncapped query)");
  if (dev.is_host()) return cpu::grid_within(g, q, nq, r2, max_points, idx, d2, count);
  if constexpr (kCudaEnabled)
    return cuda::grid_within(dev, g, q, nq, r2, max_points, idx, d2, count);
  throw_without_cuda("grid_within");
}

void grid_count_within(const Device& dev, const GridView& g, const double* q, Index nq, double r2,
                       Index* count) {
  TESSERA_CHECK(nq >= 0, "grid_count_within: " << nq << " queries");
  if (dev.is_host()) return cpu::grid_count_within(g, q, nq, r2, count);
  if constexpr (kCudaEnabled) return cuda::grid_count_within(dev, g, q, nq, r2, count);
  throw_without_cuda("grid_count_within");
}

}  // namespace tessera::kernels
