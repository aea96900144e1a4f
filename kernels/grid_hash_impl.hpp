#pragma once
// The grid hash's query functors, shared by the OpenMP loops and the CUDA kernels: one call
// per query, lists kept sorted by (squared distance, global id) by insertion.
#include "kernels/floor.hpp"
#include <math.h>

#include "decomp/host_device.hpp"
#include "kernels/grid_hash.hpp"

namespace tessera::kernels {

// The cell of coordinate x along dim d, clamped to the grid (queries may lie outside it).
TESSERA_HD inline Index grid_cell(const GridView& g, int d, double x) {
  const double t = (x - g.lo[d]) / g.cell;
  if (!(t >= 0)) return 0;  // below the grid (or NaN)
  if (!(t < static_cast<double>(g.dims[d]))) return g.dims[d] - 1;
  return static_cast<Index>(t);
}

// The squared distance as every search of the point family computes it (x, y, z in order).
TESSERA_HD inline double grid_d2(const double* p, const double* x) {
  const double dx = x[0] - p[0], dy = x[1] - p[1], dz = x[2] - p[2];
  return dx * dx + dy * dy + dz * dz;
}

// A sorted list of at most `cap` (d2, row) pairs in caller memory; ties by global id.
struct SortedHits {
  Index* idx;
  double* d2;
  Index cap;
  Index count = 0;
  const std::int64_t* ids;

  TESSERA_HD bool before(double a, Index ra, double b, Index rb) const {
    return a < b || (a == b && ids[ra] < ids[rb]);
  }
  TESSERA_HD void offer(double d, Index row) {
    if (count == cap && !before(d, row, d2[cap - 1], idx[cap - 1])) return;
    Index i = count < cap ? count++ : cap - 1;  // full: the worst drops out
    for (; i > 0 && before(d, row, d2[i - 1], idx[i - 1]); --i) {
      d2[i] = d2[i - 1];
      idx[i] = idx[i - 1];
    }
    d2[i] = d;
    idx[i] = row;
  }
};

// Offers every point of cell (x, y, z) to `fn(slot, d2)`: slots are positions in the grid's
// cell-sorted arrays (a cell's points are contiguous there), rows come from order[slot].
template <class Fn>
TESSERA_HD inline void grid_scan_cell(const GridView& g, const double* p, Index x, Index y, Index z,
                                      Fn& fn) {
  const Index c = (z * g.dims[1] + y) * g.dims[0] + x;
  for (Index t = g.cell_start[c]; t < g.cell_start[c + 1]; ++t) fn(t, grid_d2(p, g.xyz + 3 * t));
}

// The hits' slots as rows of the indexed set.
TESSERA_HD inline void grid_slots_to_rows(const GridView& g, Index* idx, Index count) {
  for (Index j = 0; j < count; ++j) idx[j] = g.order[idx[j]];
}

// A lower bound of the distance from p (in cell c) to any point of the cells at Chebyshev
// offset r: such a point is, in some dim, in the cell at offset +-r, at least that far along
// that dim. Shrunk by a margin for the binning's rounding; <= 0: no bound.
TESSERA_HD inline double grid_ring_bound(const GridView& g, const double* p, const Index c[3],
                                         Index r) {
  double bound = INFINITY;
  for (int d = 0; d < 3; ++d) {
    if (c[d] + r < g.dims[d]) {
      const double gap = g.lo[d] + static_cast<double>(c[d] + r) * g.cell - p[d];
      bound = fmin(bound, gap > 0 ? gap : 0);
    }
    if (c[d] - r >= 0) {
      const double gap = p[d] - (g.lo[d] + static_cast<double>(c[d] - r + 1) * g.cell);
      bound = fmin(bound, gap > 0 ? gap : 0);
    }
  }
  return bound * (1 - 1e-12) - 1e-12 * g.cell;
}

struct GridKnnQuery {
  GridView g;
  const double* q;
  Index k;
  Index* idx;
  double* d2;
  Index* count;

  TESSERA_HD void operator()(Index i) const {
    const double* p = q + 3 * i;
    SortedHits hits{idx + i * k, d2 + i * k, k, 0, g.ids};
    if (k <= 0 || g.n == 0) {
      count[i] = 0;
      return;
    }
    Index c[3], rmax = 0;
    for (int d = 0; d < 3; ++d) {
      c[d] = grid_cell(g, d, p[d]);
      const Index far = c[d] > g.dims[d] - 1 - c[d] ? c[d] : g.dims[d] - 1 - c[d];
      rmax = far > rmax ? far : rmax;
    }
    auto take = [&](Index row, double dd) { hits.offer(dd, row); };
    for (Index r = 0; r <= rmax; ++r) {
      if (hits.count == k && r > 0) {
        // Stop when even the ring's nearest cell lies beyond the k-th distance (strictly:
        // an equal one may win on its id).
        const double bound = grid_ring_bound(g, p, c, r);
        if (bound > 0 && bound * bound > hits.d2[k - 1]) break;
      }
      for (Index z = c[2] - r; z <= c[2] + r; ++z) {
        if (z < 0 || z >= g.dims[2]) continue;
        const bool zface = z == c[2] - r || z == c[2] + r;
        for (Index y = c[1] - r; y <= c[1] + r; ++y) {
          if (y < 0 || y >= g.dims[1]) continue;
          const bool yface = zface || y == c[1] - r || y == c[1] + r;
          // Inside the ring's z and y faces, every x; elsewhere only the two x faces.
          const Index step = yface ? 1 : (r > 0 ? 2 * r : 1);
          for (Index x = c[0] - r; x <= c[0] + r; x += step)
            if (x >= 0 && x < g.dims[0]) grid_scan_cell(g, p, x, y, z, take);
        }
      }
    }
    grid_slots_to_rows(g, hits.idx, hits.count);
    count[i] = hits.count;
  }
};

// The cells a ball of squared radius r2 around p overlaps, per dim [lo, hi].
TESSERA_HD inline void grid_ball_cells(const GridView& g, const double* p, double r2, Index lo[3],
                                       Index hi[3]) {
  const double r = sqrt(r2);
  for (int d = 0; d < 3; ++d) {
    lo[d] = grid_cell(g, d, p[d] - r);
    hi[d] = grid_cell(g, d, p[d] + r);
  }
}

// A lower bound of the squared distance along dim d from x to cell c's slab, shrunk by a
// margin for the binning's rounding (a point binned into c may lie a few rounding errors of
// its coordinate outside the slab, also far from the origin), so a skipped cell never holds
// a point within the radius.
TESSERA_HD inline double grid_cell_gap(const GridView& g, int d, Index c, double x) {
  const double lo = g.lo[d] + static_cast<double>(c) * g.cell, hi = lo + g.cell;
  double gap = x < lo ? lo - x : (x > hi ? x - hi : 0.0);
  gap = gap * (1 - 1e-12) - 1e-12 * g.cell - 1e-14 * (fabs(x) + fabs(lo) + fabs(hi));
  return gap > 0 ? gap * gap : 0.0;
}

struct GridWithinQuery {
  GridView g;
  const double* q;
  double r2;
  Index cap;
  Index* idx;  // null: count only
  double* d2;
  Index* count;

  TESSERA_HD void operator()(Index i) const {
    const double* p = q + 3 * i;
    Index n = 0;
    SortedHits hits{idx ? idx + i * cap : nullptr, d2 ? d2 + i * cap : nullptr, cap, 0, g.ids};
    if (g.n > 0 && r2 >= 0) {
      Index lo[3], hi[3];
      grid_ball_cells(g, p, r2, lo, hi);
      const double rr = r2;
      if (!idx) {
        // Counting: every cell the ball overlaps, less those whose box lies beyond the
        // radius (a ball overlaps about half the cube of cells it spans).
        auto tally = [&](Index, double dd) { n += dd <= rr ? 1 : 0; };
        for (Index z = lo[2]; z <= hi[2]; ++z) {
          const double gz = grid_cell_gap(g, 2, z, p[2]);
          for (Index y = lo[1]; y <= hi[1]; ++y) {
            const double gy = gz + grid_cell_gap(g, 1, y, p[1]);
            if (gy > rr) continue;
            for (Index x = lo[0]; x <= hi[0]; ++x)
              if (gy + grid_cell_gap(g, 0, x, p[0]) <= rr) grid_scan_cell(g, p, x, y, z, tally);
          }
        }
      } else {
        // The nearest `cap` within the radius: rings of cells outward from p's cell, as the
        // kNN walks, clipped to the ball's cells; once the list is full, rings and cells
        // beyond its last distance are skipped. Where points crowd (clusters, surfaces)
        // the ball holds far more than cap points and the walk stops near p.
        Index c[3], rmax = 0;
        for (int d = 0; d < 3; ++d) {
          c[d] = grid_cell(g, d, p[d]);
          const Index far = c[d] - lo[d] > hi[d] - c[d] ? c[d] - lo[d] : hi[d] - c[d];
          rmax = far > rmax ? far : rmax;
        }
        auto take = [&](Index row, double dd) {
          if (dd <= rr) hits.offer(dd, row);
        };
        for (Index r = 0; r <= rmax; ++r) {
          const bool full = hits.count == cap;
          if (full && r > 0) {
            const double bound = grid_ring_bound(g, p, c, r);
            if (bound > 0 && bound * bound > hits.d2[cap - 1]) break;
          }
          // Cells whose box lies beyond this squared distance hold no answer.
          const double limit = full && hits.d2[cap - 1] < rr ? hits.d2[cap - 1] : rr;
          for (Index z = c[2] - r; z <= c[2] + r; ++z) {
            if (z < lo[2] || z > hi[2]) continue;
            const double gz = grid_cell_gap(g, 2, z, p[2]);
            if (gz > limit) continue;
            const bool zface = z == c[2] - r || z == c[2] + r;
            for (Index y = c[1] - r; y <= c[1] + r; ++y) {
              if (y < lo[1] || y > hi[1]) continue;
              const double gy = gz + grid_cell_gap(g, 1, y, p[1]);
              if (gy > limit) continue;
              const bool yface = zface || y == c[1] - r || y == c[1] + r;
              const Index step = yface ? 1 : (r > 0 ? 2 * r : 1);
              for (Index x = c[0] - r; x <= c[0] + r; x += step)
                if (x >= lo[0] && x <= hi[0] && gy + grid_cell_gap(g, 0, x, p[0]) <= limit)
                  grid_scan_cell(g, p, x, y, z, take);
            }
          }
        }
      }
    }
    if (idx) grid_slots_to_rows(g, hits.idx, hits.count);
    count[i] = idx ? hits.count : n;
  }
};

}  // namespace tessera::kernels
