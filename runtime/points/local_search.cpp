#include "runtime/points/local_search.hpp"

#include <algorithm>
#include <limits>

#include "decomp/error.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

void local_search(const kernels::GridHash& grid, const std::int64_t* ids, const double* queries,
                  Index m, const std::vector<Index>& order, Index keep, double r2,
                  std::int64_t* out_ids, double* out_d2, std::int64_t* out_count) {
  TESSERA_CHECK(
      keep >= 1 && static_cast<Index>(order.size()) == m,
      "local_search: keep " << keep << ", " << order.size() << " of " << m << " queries ordered");
  const double inf = std::numeric_limits<double>::infinity();
  if (m == 0) return;
  if (grid.size() == 0) {
    std::fill(out_ids, out_ids + m * keep, -1);
    std::fill(out_d2, out_d2 + m * keep, inf);
    if (out_count) std::fill(out_count, out_count + m, 0);
    return;
  }
  // The queries in search order; answers come back in that order. Scratch through tensors,
  // so repeated searches reuse the host's cached blocks.
  Tensor q = Tensor::empty({m, 3}, DType::f64);
  for (Index t = 0; t < m; ++t)
    for (int c = 0; c < 3; ++c)
      q.data<double>()[3 * t + c] = queries[3 * order[static_cast<std::size_t>(t)] + c];
  const MemSpace space = grid.space();
  const Device dev = Device::of(space);
  const Tensor qd = q.in_space(space);
  Tensor idx = Tensor::empty({m, keep}, DType::i64, space),
         d2 = Tensor::empty({m, keep}, DType::f64, space),
         cnt = Tensor::empty({m}, DType::i64, space);
  static_assert(sizeof(Index) == sizeof(std::int64_t));
  auto* ip = reinterpret_cast<Index*>(idx.data<std::int64_t>());
  auto* cp = reinterpret_cast<Index*>(cnt.data<std::int64_t>());
  if (r2 < 0)
    kernels::grid_knn(dev, grid.view(), qd.data<double>(), m, keep, ip, d2.data<double>(), cp);
  else
    kernels::grid_within(dev, grid.view(), qd.data<double>(), m, r2, keep, ip, d2.data<double>(),
                         cp);
  idx = idx.in_space(MemSpace::Host);  // from a device: waits for the search
  d2 = d2.in_space(MemSpace::Host);
  cnt = cnt.in_space(MemSpace::Host);
  const std::int64_t* rows = idx.data<std::int64_t>();
  const double* dd = d2.data<double>();
  for (Index t = 0; t < m; ++t) {
    const Index qi = order[static_cast<std::size_t>(t)];
    const Index c = cnt.data<std::int64_t>()[t];
    if (out_count) out_count[qi] = c;
    std::int64_t* oi = out_ids + qi * keep;
    double* od = out_d2 + qi * keep;
    for (Index j = 0; j < c; ++j) oi[j] = ids[rows[t * keep + j]], od[j] = dd[t * keep + j];
    for (Index j = c; j < keep; ++j) oi[j] = -1, od[j] = inf;
  }
}

}  // namespace tessera
