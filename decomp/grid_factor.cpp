#include "decomp/grid_factor.hpp"

#include <limits>

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

namespace {
struct Search {
  const std::vector<Index>& shape;
  const std::vector<bool>& ok;
  std::vector<int> cur, best;
  double best_cost = std::numeric_limits<double>::infinity();
  bool best_fits = false;

  void run(std::size_t d, int left) {
    if (d == shape.size()) {
      if (left != 1) return;
      bool fits = true;
      for (std::size_t e = 0; e < shape.size(); ++e)
        if (cur[e] > shape[e]) fits = false;  // more ranks than cells: empty blocks
      const double cost = block_surface(shape, cur);
      // Grids without empty blocks win; then lower surface; strict '<' keeps the first
      // found, and the enumeration below tries large factors on outer dims first.
      if ((fits && !best_fits) || (fits == best_fits && cost < best_cost)) {
        best = cur, best_cost = cost, best_fits = fits;
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
}  // namespace

std::vector<int> min_surface_grid(int nranks, const std::vector<Index>& shape,
                                  const std::vector<bool>& splittable) {
  if (nranks < 1) throw Error("min_surface_grid: rank count must be positive");
  if (shape.empty()) throw Error("min_surface_grid: empty shape");
  std::vector<bool> ok = splittable.empty() ? std::vector<bool>(shape.size(), true) : splittable;
  if (ok.size() != shape.size()) throw Error("min_surface_grid: splittable has wrong length");
  bool any = false;
  for (bool b : ok) any = any || b;
  if (!any && nranks > 1) throw Error("min_surface_grid: no dim may be split");
  Search s{shape, ok, std::vector<int>(shape.size(), 1), {}};
  s.run(0, nranks);
  return s.best;
}

}  // namespace tessera
