#include "runtime/points/local_search.hpp"

#include <limits>

#include "decomp/error.hpp"
#include "kernels/grid_hash.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

LocalHits local_search(const double* xyz, const std::int64_t* ids, Index n, const double* queries,
                       Index m, const std::vector<Index>& order, Index keep, double r2,
                       MemSpace space) {
  TESSERA_CHECK(
      keep >= 1 && static_cast<Index>(order.size()) == m,
      "local_search: keep " << keep << ", " << order.size() << " of " << m << " queries ordered");
  LocalHits h;
  h.keep = keep;
  h.ids.assign(static_cast<std::size_t>(m * keep), -1);
  h.d2.assign(h.ids.size(), std::numeric_limits<double>::infinity());
  h.count.assign(static_cast<std::size_t>(m), 0);
  if (m == 0 || n == 0) return h;
  // The queries in search order; answers come back in that order.
  Tensor q = Tensor::empty({m, 3}, DType::f64);
  for (Index t = 0; t < m; ++t)
    for (int c = 0; c < 3; ++c)
      q.data<double>()[3 * t + c] = queries[3 * order[static_cast<std::size_t>(t)] + c];
  const kernels::GridHash grid(xyz, ids, n, space);
  const Device dev = Device::of(space);
  const Tensor qd = space == MemSpace::Host ? q : q.to(space);
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
  if (space != MemSpace::Host) {  // waits for the search
    idx = idx.to(MemSpace::Host);
    d2 = d2.to(MemSpace::Host);
    cnt = cnt.to(MemSpace::Host);
  }
  for (Index t = 0; t < m; ++t) {
    const Index qi = order[static_cast<std::size_t>(t)];
    const Index c = cnt.data<std::int64_t>()[t];
    h.count[static_cast<std::size_t>(qi)] = c;
    for (Index j = 0; j < c; ++j) {
      const std::size_t to = static_cast<std::size_t>(qi * keep + j),
                        from = static_cast<std::size_t>(t * keep + j);
      h.ids[to] = ids[idx.data<std::int64_t>()[from]];
      h.d2[to] = d2.data<double>()[from];
    }
  }
  return h;
}

}  // namespace tessera
