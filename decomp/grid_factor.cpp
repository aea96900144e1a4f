#include "decomp/grid_factor.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "decomp/error.hpp"

namespace tessera {

double block_surface(const std::vector<Index>& shape, const std::vector<int>& grid) {
  std::vector<double> ext(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d)
    ext[d] = static_cast<double>((shape[d] + grid[d] - 1) / grid[d]);  // largest block
  double s = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    double face = 1;
    for (std::size_t e = 0; e < shape.size(); ++e)
      if (e != d) face *= ext[e];
    // The busiest block's neighbours along d: none if uncut, one side if cut in two.
    s += (grid[d] == 1 ? 0 : grid[d] == 2 ? 1 : 2) * face;
  }
  return s;
}

double block_halo_lines(const std::vector<Index>& shape, const std::vector<int>& grid) {
  constexpr double kCellsPerLine = 16;  // 64-byte lines of 4-byte cells
  const std::size_t n = shape.size(), last = n - 1;
  std::vector<double> ext(n);
  for (std::size_t d = 0; d < n; ++d)
    ext[d] = static_cast<double>((shape[d] + grid[d] - 1) / grid[d]);  // largest block
  double lines = 0;
  for (std::size_t d = 0; d < n; ++d) {
    if (grid[d] == 1) continue;
    double rows = 1;
    for (std::size_t e = 0; e + 1 < n; ++e)
      if (e != d) rows *= ext[e];
    const double run = d == last ? 1 : ext[last];
    lines += (grid[d] == 2 ? 1 : 2) * rows * std::ceil(run / kCellsPerLine);
  }
  return lines;
}

namespace {
struct Search {
  const std::vector<Index>& shape;
  const std::vector<bool>& ok;
  bool by_lines;  // cache lines first, then surface; else surface only
  std::vector<int> cur, best;
  double best_cost = std::numeric_limits<double>::infinity();
  double best_surface = std::numeric_limits<double>::infinity();
  bool best_fits = false;

  void run(std::size_t d, int left) {
    if (d == shape.size()) {
      if (left != 1) return;
      bool fits = true;
      for (std::size_t e = 0; e < shape.size(); ++e)
        if (cur[e] > shape[e]) fits = false;  // more ranks than cells: empty blocks
      const double surface = block_surface(shape, cur);
      const double cost = by_lines ? block_halo_lines(shape, cur) : surface;
      // Grids without empty blocks win; then lower cost, then lower surface; strict '<'
      // keeps the first found, and the enumeration below tries large factors on outer dims
      // first.
      const bool better =
          cost < best_cost || (cost == best_cost && by_lines && surface < best_surface);
      if ((fits && !best_fits) || (fits == best_fits && better)) {
        best = cur, best_cost = cost, best_surface = surface, best_fits = fits;
      }
      return;
    }
    for (int f = left; f >= 1; --f) {
      if (left % f) continue;
      if (f > 1 && !ok[d]) continue;
      cur[d] = f;
      run(d + 1, left / f);
    }
  }
};

std::vector<int> best_grid(const char* who, bool by_lines, int nranks,
                           const std::vector<Index>& shape, const std::vector<bool>& splittable) {
  const std::string w(who);
  if (nranks < 1) throw Error(w + ": rank count must be positive");
  if (shape.empty()) throw Error(w + ": empty shape");
  std::vector<bool> ok = splittable.empty() ? std::vector<bool>(shape.size(), true) : splittable;
  if (ok.size() != shape.size()) throw Error(w + ": splittable has wrong length");
  bool any = false;
  for (bool b : ok) any = any || b;
  if (!any && nranks > 1) throw Error(w + ": no dim may be split");
  Search s{shape, ok, by_lines, std::vector<int>(shape.size(), 1), {}};
  s.run(0, nranks);
  return s.best;
}
}  // namespace

std::vector<int> min_surface_grid(int nranks, const std::vector<Index>& shape,
                                  const std::vector<bool>& splittable) {
  return best_grid("min_surface_grid", false, nranks, shape, splittable);
}

std::vector<int> min_halo_traffic_grid(int nranks, const std::vector<Index>& shape,
                                       const std::vector<bool>& splittable) {
  return best_grid("min_halo_traffic_grid", true, nranks, shape, splittable);
}

}  // namespace tessera
