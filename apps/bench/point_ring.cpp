#include "apps/bench/point_ring.hpp"

#include <algorithm>
#include <limits>

#include "kernels/neighbors.hpp"
#include "runtime/points/local_search.hpp"
#include "runtime/points/neighbor_query.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::bench {
namespace {

// Merges a sorted list of `count` (id, d2) into the sorted best `keep` of one query (padding
// sorts last).
void merge_into(std::int64_t* bi, double* bd, Index keep, const std::int64_t* ai, const double* ad,
                Index count, std::vector<kernels::Neighbor>& tmp) {
  if (count == 0) return;
  if (bi[0] < 0) {  // nothing yet: a copy
    std::copy(ai, ai + count, bi);
    std::copy(ad, ad + count, bd);
    return;
  }
  tmp.clear();
  Index a = 0, b = 0;
  while (static_cast<Index>(tmp.size()) < keep) {
    const bool have_b = b < keep && bi[b] >= 0, have_a = a < count;
    if (!have_a && !have_b) break;
    const kernels::Neighbor nb{have_b ? bd[b] : 0, have_b ? bi[b] : -1, -1};
    const kernels::Neighbor na{have_a ? ad[a] : 0, have_a ? ai[a] : -1, -1};
    if (have_a && (!have_b || na < nb))
      tmp.push_back(na), ++a;
    else
      tmp.push_back(nb), ++b;
  }
  for (std::size_t j = 0; j < tmp.size(); ++j) bi[j] = tmp[j].id, bd[j] = tmp[j].d2;
}

}  // namespace

RingLists ring_query(MPI_Comm comm, const Tensor& xyz, const Tensor& ids, Index keep, double r2,
                     RingSearch search) {
  int P = 1, me = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  const Index m = xyz.shape(0);
  const double* q = xyz.data<double>();
  RingLists out{keep, std::vector<std::int64_t>(static_cast<std::size_t>(m * keep), -1),
                std::vector<double>(static_cast<std::size_t>(m * keep),
                                    std::numeric_limits<double>::infinity())};
  std::vector<double> bx(q, q + 3 * m), rx;
  std::vector<std::int64_t> bi(ids.data<std::int64_t>(), ids.data<std::int64_t>() + m), ri;
  std::vector<kernels::Neighbor> tmp;
  // A block's answers, in tensors (the host's cached blocks, reused from call to call).
  const Index rows = search == RingSearch::Grid ? m : 0;
  const Tensor hid = Tensor::empty({rows, keep}, DType::i64),
               hd2 = Tensor::empty({rows, keep}, DType::f64),
               hcount = Tensor::empty({rows}, DType::i64);
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  const std::vector<Index> order = query_order(xyz);  // Tessera's order, for the same cache use
  for (int step = 0; step < P; ++step) {
    const Index n = static_cast<Index>(bi.size());
    if (search == RingSearch::KdTree) {
      // A k-d tree on the visiting block, one search (and list) per local query.
      const kernels::PointIndex tree(bx.data(), bi.data(), n);
      std::vector<std::int64_t> li(static_cast<std::size_t>(keep));
      std::vector<double> ld(static_cast<std::size_t>(keep));
      for (const Index i : order) {
        const auto hits = r2 < 0 ? tree.knn(q + 3 * i, keep) : tree.within(q + 3 * i, r2, keep);
        for (std::size_t j = 0; j < hits.size(); ++j) li[j] = hits[j].id, ld[j] = hits[j].d2;
        const std::size_t at = static_cast<std::size_t>(i * keep);
        merge_into(out.ids.data() + at, out.d2.data() + at, keep, li.data(), ld.data(),
                   static_cast<Index>(hits.size()), tmp);
      }
    } else {
      // The visiting block's answers for every local query, through Tessera's local search
      // (into buffers reused from block to block), merged into the best so far.
      {
        const kernels::GridHash grid(bx.data(), bi.data(), n, MemSpace::Host);
        local_search(grid, bi.data(), q, m, order, keep, r2, hid.data<std::int64_t>(),
                     hd2.data<double>(), hcount.data<std::int64_t>());
      }
      for (const Index i : order) {
        const std::size_t at = static_cast<std::size_t>(i * keep);
        merge_into(out.ids.data() + at, out.d2.data() + at, keep, hid.data<std::int64_t>() + at,
                   hd2.data<double>() + at, hcount.data<std::int64_t>()[i], tmp);
      }
    }
    if (step == P - 1) break;
    // The block moves on: its size, then coordinates and ids.
    Index rn = 0;
    TESSERA_MPI(MPI_Sendrecv(&n, 1, MPI_INT64_T, next, 0, &rn, 1, MPI_INT64_T, prev, 0, comm,
                             MPI_STATUS_IGNORE));
    rx.resize(static_cast<std::size_t>(3 * rn));
    ri.resize(static_cast<std::size_t>(rn));
    std::vector<MPI_Request> req;  // in pieces past 1 GiB (runtime/comm/message_pieces)
    irecv_pieces(rx.data(), 3 * rn, MPI_DOUBLE, prev, 1, comm, req);
    irecv_pieces(ri.data(), rn, MPI_INT64_T, prev, 2, comm, req);
    isend_pieces(bx.data(), 3 * n, MPI_DOUBLE, next, 1, comm, req);
    isend_pieces(bi.data(), n, MPI_INT64_T, next, 2, comm, req);
    TESSERA_MPI(MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE));
    bx.swap(rx);
    bi.swap(ri);
  }
  return out;
}

}  // namespace tessera::bench
