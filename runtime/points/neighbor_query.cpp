#include "runtime/points/neighbor_query.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

#include "decomp/hash.hpp"
#include "kernels/grid_hash.hpp"
#include "runtime/points/local_search.hpp"
#include "runtime/comm/alltoallv.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

void check_rows3(const Tensor& t, const char* what) {
  TESSERA_CHECK(t.space() == MemSpace::Host && t.dtype() == DType::f64 && t.ndim() == 2 &&
                    t.shape(1) == 3 && t.is_contiguous(),
                "neighbour query: " << what << " are a contiguous host (n, 3) float64 tensor, not "
                                    << name_of(t.dtype()) << " " << shape_str(t.shape()));
}

// Points (what) with their ids, and queries: the shapes and types every query takes.
void check_points_and_queries(const Tensor& points, const Tensor& ids, const Tensor& queries,
                              const char* what = "points") {
  check_rows3(points, what);
  check_rows3(queries, "queries");
  TESSERA_CHECK(ids.space() == MemSpace::Host && ids.dtype() == DType::i64 && ids.ndim() == 1 &&
                    ids.numel() == points.shape(0) && ids.is_contiguous(),
                "neighbour query: the " << what << "' ids are a contiguous host int64 tensor of "
                                        << points.shape(0) << " (one per point), not "
                                        << name_of(ids.dtype()) << " " << shape_str(ids.shape()));
  // The lists mark a missing neighbour with -1: a negative id would read as one.
  const std::int64_t* id = ids.data<std::int64_t>();
  for (Index i = 0; i < ids.numel(); ++i)
    TESSERA_CHECK(id[i] >= 0, "neighbour query: row "
                                  << i << " of the " << what << " has the id " << id[i]
                                  << "; ids are >= 0 (-1 marks a missing neighbour)");
}

void check_ball(double r, Index max_points) {
  TESSERA_CHECK(r >= 0 && std::isfinite(r) && max_points >= 1,
                "ball query: radius " << r << ", max_points " << max_points);
}

// The first of (n, 3) rows with a NaN or infinite coordinate, or -1.
Index first_nonfinite(const Tensor& rows) {
  for (Index i = 0; i < rows.shape(0); ++i) {
    const double* x = rows.data<double>() + 3 * i;
    if (!std::isfinite(x[0]) || !std::isfinite(x[1]) || !std::isfinite(x[2])) return i;
  }
  return -1;
}

// "(x, y, z)" of row i.
std::string row_str(const Tensor& rows, Index i) {
  const double* x = rows.data<double>() + 3 * i;
  std::ostringstream os;
  os << '(' << x[0] << ", " << x[1] << ", " << x[2] << ')';
  return os.str();
}

// The first of (n, 3) rows outside `region`, or -1.
Index first_outside(const Region3& region, const Tensor& rows) {
  for (Index i = 0; i < rows.shape(0); ++i) {
    const double* x = rows.data<double>() + 3 * i;
    if (region.distance2_to({x[0], x[1], x[2]}) != 0.0) return i;
  }
  return -1;
}

// Collective: the rounds ask only the ranks whose region lies near a query, so every
// rank's points must lie in its own region (true of the points a layout was built from,
// and of any point under RCB, whose regions tile space; not of every point under SFC).
// And the queries must be finite: a NaN coordinate has no nearest points (kNN returned
// arbitrary ones with d2 = nan), and one rank's refusal must not leave the others waiting:
// `own_checks` (the arguments of this rank's call: shapes, k, radius) fail collectively, and
// `call` / `keep` (k, or max_points) must be equal on every rank: a rank answers another's
// requests with its own, so a smaller one there would drop true neighbours without a word.
template <class OwnChecks>
void check_inputs(MPI_Comm comm, const SpatialLayout& layout, const Tensor& points,
                  const Tensor& queries, const char* call, const char* keep_name, Index keep,
                  const OwnChecks& own_checks) {
  int P = 1, me = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  std::string own;
  try {
    TESSERA_CHECK(layout.parts() == P, "neighbour query: a layout of "
                                           << layout.parts() << " parts on " << P << " ranks");
    own_checks();
  } catch (const std::exception& e) {
    own = e.what();
  }
  Index outside = -1, bad_query = -1;
  std::ostringstream msg;
  if (!own.empty()) {
    msg << own;
  } else {
    outside = first_outside(layout.region(me), points);
    bad_query = first_nonfinite(queries);
    if (outside >= 0)
      msg << "neighbour query: point " << outside << " lies outside this rank's region (rank " << me
          << "); migrate the points to their owners of this layout first";
    else if (bad_query >= 0)
      msg << "neighbour query: query " << bad_query << " has a non-finite coordinate "
          << row_str(queries, bad_query);
  }
  // One all-reduce: every rank's verdict, and whether they agree on `keep`.
  collective_check(comm, own.empty() && outside < 0 && bad_query < 0, msg.str(), call, keep_name,
                   std::to_string(keep));
}

struct Request {  // a query sent to another rank
  double xyz[3];
  double r2;  // answer points with d2 <= r2
  std::int64_t query;
};

struct Answer {
  double d2;
  std::int64_t id;
};

// Exchanges variable-length lists of trivially copyable records with every rank.
template <class T>
std::vector<std::vector<T>> exchange_records(MPI_Comm comm,
                                             const std::vector<std::vector<T>>& out) {
  const std::size_t P = out.size();
  std::vector<Index> sc(P);
  for (std::size_t p = 0; p < P; ++p) sc[p] = static_cast<Index>(out[p].size());
  const std::vector<Index> rc = exchange_counts(comm, sc);
  const Packed sp = packed(sc), rp = packed(rc);
  std::vector<T> sbuf(static_cast<std::size_t>(sp.total)), rbuf(static_cast<std::size_t>(rp.total));
  for (std::size_t p = 0; p < P; ++p)
    std::copy(out[p].begin(), out[p].end(), sbuf.begin() + sp.displs[p]);
  alltoallv_rows(comm, sbuf.data(), sc, rbuf.data(), rc, static_cast<Index>(sizeof(T)));
  std::vector<std::vector<T>> in(P);
  for (std::size_t p = 0; p < P; ++p)
    in[p].assign(rbuf.begin() + rp.displs[p], rbuf.begin() + rp.displs[p] + rc[p]);
  return in;
}

// Collective: ids are unique across the ranks (ties between equal distances are broken by
// id, so a repeated id would make the lists depend on the rank count; the usual slip is local
// row numbers, which repeat on every rank). Each id goes to the rank of its hash, which sorts
// what it receives; the first repeat found (lowest id) is named on every rank. One all-to-all of 16
// bytes per point, small beside the search.
void check_unique_ids(MPI_Comm comm, const Tensor& ids, const char* call) {
  int P = 1;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  struct Held {
    std::int64_t id, row;
  };
  std::vector<std::vector<Held>> out(static_cast<std::size_t>(P));
  const std::int64_t* id = ids.data<std::int64_t>();
  // By a mixed hash: ids of a common stride (all even, all multiples of P) spread too.
  for (Index i = 0; i < ids.numel(); ++i)
    out[static_cast<std::size_t>(splitmix64(static_cast<std::uint64_t>(id[i])) %
                                 static_cast<std::uint64_t>(P))]
        .push_back({id[i], static_cast<std::int64_t>(i)});
  const std::vector<std::vector<Held>> in = exchange_records(comm, out);
  struct From {
    std::int64_t id, row;
    int rank;
  };
  std::vector<From> all;
  for (int p = 0; p < P; ++p)
    for (const Held& h : in[static_cast<std::size_t>(p)]) all.push_back({h.id, h.row, p});
  std::sort(all.begin(), all.end(), [](const From& a, const From& b) {
    return a.id != b.id ? a.id < b.id : a.rank != b.rank ? a.rank < b.rank : a.row < b.row;
  });
  // This rank's first repeat: (id, rank, row, rank, row), id -1 for none.
  std::int64_t mine[5] = {-1, 0, 0, 0, 0};
  for (std::size_t i = 1; i < all.size(); ++i)
    if (all[i].id == all[i - 1].id) {
      mine[0] = all[i].id;
      mine[1] = all[i - 1].rank, mine[2] = all[i - 1].row;
      mine[3] = all[i].rank, mine[4] = all[i].row;
      break;
    }
  std::vector<std::int64_t> every(static_cast<std::size_t>(5 * P));
  TESSERA_MPI(MPI_Allgather(mine, 5, MPI_INT64_T, every.data(), 5, MPI_INT64_T, comm));
  const std::int64_t* first = nullptr;
  for (int p = 0; p < P; ++p) {
    const std::int64_t* r = every.data() + 5 * p;
    if (r[0] >= 0 && (!first || r[0] < first[0])) first = r;
  }
  if (!first) return;
  std::ostringstream msg;
  msg << call << ": the point id " << first[0] << " is given twice (row " << first[2] << " of rank "
      << first[1] << "'s points and row " << first[4] << " of rank " << first[3]
      << "'s); ids must be unique across the ranks (global ids, not each rank's row numbers)";
  throw Error(msg.str());  // on every rank alike: the same all-gathered repeat
}

// Writes a sorted list into row qi of the output: its first `keep`, padded.
void write_row(NeighborLists& out, Index qi, Index keep, const std::vector<kernels::Neighbor>& l) {
  std::int64_t* ids = out.ids.data<std::int64_t>() + qi * keep;
  double* d2 = out.d2.data<double>() + qi * keep;
  for (Index j = 0; j < keep; ++j) {
    const bool have = j < static_cast<Index>(l.size());
    ids[j] = have ? l[static_cast<std::size_t>(j)].id : -1;
    d2[j] = have ? l[static_cast<std::size_t>(j)].d2 : kInf;
  }
}

// The host grid of this rank's points: both rounds' when the local search runs on the
// host; on a device only the second round's, made when another rank asks.
struct Grids {
  const Tensor& points;
  const Tensor& ids;
  MemSpace search;
  std::unique_ptr<kernels::GridHash> host;
  const kernels::GridHash& on_host() {
    if (!host)
      host = std::make_unique<kernels::GridHash>(points.data<double>(), ids.data<std::int64_t>(),
                                                 points.shape(0), MemSpace::Host);
    return *host;
  }
};

// The shared second round: `out` holds each query's local answers (sorted rows), `bound` its
// r2; asks every other rank whose region lies within the bound, and merges the answers into
// the rows (rows, not a list per query: most queries get no remote answers).
NeighborLists finish(MPI_Comm comm, const SpatialLayout& layout, Grids& grids,
                     const Tensor& queries, const std::vector<Index>& order, NeighborLists out,
                     const std::vector<double>& bound, Index keep) {
  int P = 1, me = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  std::vector<std::vector<Request>> req(static_cast<std::size_t>(P));
  for (const Index qi : order) {  // the ranks asked search in this order too
    const double* x = queries.data<double>() + 3 * qi;
    const Point3 p{x[0], x[1], x[2]};
    for (int r = 0; r < P; ++r) {
      if (r == me) continue;
      if (layout.region(r).distance2_to(p) <= bound[static_cast<std::size_t>(qi)])
        req[static_cast<std::size_t>(r)].push_back(
            {{x[0], x[1], x[2]}, bound[static_cast<std::size_t>(qi)], qi});
    }
  }
  const auto got = exchange_records(comm, req);
  // Others' requests (about the surface of this region) are answered on the host.
  std::vector<std::vector<Answer>> ans(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r)
    for (const Request& q : got[static_cast<std::size_t>(r)]) {
      const auto hits = grids.on_host().within(q.xyz, q.r2, keep);
      ans[static_cast<std::size_t>(r)].push_back({static_cast<double>(hits.size()), -2});  // header
      for (const auto& h : hits) ans[static_cast<std::size_t>(r)].push_back({h.d2, h.id});
    }
  const auto back = exchange_records(comm, ans);
  std::vector<kernels::Neighbor> list;
  for (int r = 0; r < P; ++r) {  // answers come in the order the requests were sent
    const auto& a = back[static_cast<std::size_t>(r)];
    std::size_t pos = 0;
    for (const Request& q : req[static_cast<std::size_t>(r)]) {
      const auto count = static_cast<std::size_t>(a[pos++].d2);
      if (count == 0) continue;
      list.clear();
      for (Index j = 0; j < keep && out.ids.data<std::int64_t>()[q.query * keep + j] >= 0; ++j)
        list.push_back({out.d2.data<double>()[q.query * keep + j],
                        out.ids.data<std::int64_t>()[q.query * keep + j], -1});
      for (std::size_t c = 0; c < count; ++c, ++pos) list.push_back({a[pos].d2, a[pos].id, -1});
      std::sort(list.begin(), list.end());
      write_row(out, q.query, keep, list);
    }
  }
  return out;
}

// Round one: every query's answers among this rank's points, as rows.
NeighborLists local_round(Grids& grids, const Tensor& queries, const std::vector<Index>& order,
                          Index keep, double r2) {
  const Index m = queries.shape(0);
  NeighborLists out{Tensor::empty({m, keep}, DType::i64), Tensor::empty({m, keep}, DType::f64)};
  auto search = [&](const kernels::GridHash& g) {
    local_search(g, grids.ids.data<std::int64_t>(), queries.data<double>(), m, order, keep, r2,
                 out.ids.data<std::int64_t>(), out.d2.data<double>(), nullptr);
  };
  if (grids.search == MemSpace::Host) {
    search(grids.on_host());
  } else {
    const kernels::GridHash device(grids.points.data<double>(), grids.ids.data<std::int64_t>(),
                                   grids.points.shape(0), grids.search);
    search(device);
  }
  return out;
}

}  // namespace

std::vector<Index> query_order(const Tensor& queries) {
  check_rows3(queries, "queries");
  const Index m = queries.shape(0);
  const double* x = queries.data<double>();
  Point3 lo{kInf, kInf, kInf}, hi{-kInf, -kInf, -kInf};
  for (Index i = 0; i < 3 * m; ++i)
    if (std::isfinite(x[i]))
      lo[i % 3] = std::min(lo[i % 3], x[i]), hi[i % 3] = std::max(hi[i % 3], x[i]);
  std::vector<std::pair<std::uint64_t, Index>> keys(static_cast<std::size_t>(m));
  for (Index i = 0; i < m; ++i) {
    const Point3 p{x[3 * i], x[3 * i + 1], x[3 * i + 2]};
    const bool finite = std::isfinite(p[0]) && std::isfinite(p[1]) && std::isfinite(p[2]);
    keys[static_cast<std::size_t>(i)] = {finite ? curve_key(p, lo, hi, Curve::Morton) : 0, i};
  }
  std::sort(keys.begin(), keys.end());
  std::vector<Index> order(static_cast<std::size_t>(m));
  for (Index i = 0; i < m; ++i)
    order[static_cast<std::size_t>(i)] = keys[static_cast<std::size_t>(i)].second;
  return order;
}

NeighborLists knn_query(MPI_Comm comm, const SpatialLayout& layout, const Tensor& points,
                        const Tensor& ids, const Tensor& queries, Index k, MemSpace search) {
  check_inputs(comm, layout, points, queries, "kNN", "k", k, [&] {
    check_points_and_queries(points, ids, queries);
    TESSERA_CHECK(k >= 1, "kNN: k = " << k);
  });
  check_unique_ids(comm, ids, "kNN");
  const Index m = queries.shape(0);
  const std::vector<Index> order = query_order(queries);
  // Round one: the local k nearest bound the search.
  Grids grids{points, ids, search, nullptr};
  NeighborLists out = local_round(grids, queries, order, k, -1);
  std::vector<double> bound(static_cast<std::size_t>(m));
  for (Index qi = 0; qi < m; ++qi) {
    const bool full = out.ids.data<std::int64_t>()[qi * k + k - 1] >= 0;
    bound[static_cast<std::size_t>(qi)] = full ? out.d2.data<double>()[qi * k + k - 1] : kInf;
  }
  return finish(comm, layout, grids, queries, order, std::move(out), bound, k);
}

NeighborLists ball_query(MPI_Comm comm, const SpatialLayout& layout, const Tensor& points,
                         const Tensor& ids, const Tensor& queries, double r, Index max_points,
                         MemSpace search) {
  check_inputs(comm, layout, points, queries, "ball query", "max_points", max_points, [&] {
    check_points_and_queries(points, ids, queries);
    check_ball(r, max_points);
  });
  check_unique_ids(comm, ids, "ball query");
  const Index m = queries.shape(0);
  const std::vector<Index> order = query_order(queries);
  Grids grids{points, ids, search, nullptr};
  NeighborLists out = local_round(grids, queries, order, max_points, r * r);
  const std::vector<double> bound(static_cast<std::size_t>(m), r * r);
  return finish(comm, layout, grids, queries, order, std::move(out), bound, max_points);
}

NeighborLists ball_query(const SpatialLayout& layout, const GhostExchange& ghosts,
                         const Tensor& points, const Tensor& ids, const Tensor& ghost_points,
                         const Tensor& ghost_ids, const Tensor& queries, double r, Index max_points,
                         MemSpace search) {
  check_points_and_queries(points, ids, queries);
  check_points_and_queries(ghost_points, ghost_ids, queries, "ghost points");
  check_ball(r, max_points);
  TESSERA_CHECK(points.shape(0) == ghosts.owned() && ghost_points.shape(0) == ghosts.ghosts(),
                "ball query: " << points.shape(0) << " points and " << ghost_points.shape(0)
                               << " ghosts, the ghost exchange has " << ghosts.owned() << " and "
                               << ghosts.ghosts());
  // The ghosts hold every point within their radius of this region: balls around points of
  // the region need no more when r is not larger.
  TESSERA_CHECK(r <= ghosts.radius(),
                "ball query: radius " << r << " passes the ghosts' radius " << ghosts.radius());
  const Index i = first_outside(layout.region(ghosts.rank()), queries);
  const double* x = queries.data<double>() + 3 * std::max<Index>(i, 0);
  TESSERA_CHECK(i < 0, "ball query: query " << i << " (" << x[0] << ", " << x[1] << ", " << x[2]
                                            << ") lies outside this rank's region; ghosts answer "
                                               "only queries inside it");
  // Owned and ghost rows as one indexed set (ids are global, so the order does not matter).
  const Index n = points.shape(0), g = ghost_points.shape(0);
  Tensor all = Tensor::empty({n + g, 3}, DType::f64), all_ids = Tensor::empty({n + g}, DType::i64);
  std::copy_n(points.data<double>(), 3 * n, all.data<double>());
  std::copy_n(ghost_points.data<double>(), 3 * g, all.data<double>() + 3 * n);
  const Tensor oid = ids.contiguous(), gid = ghost_ids.contiguous();
  std::copy_n(oid.data<std::int64_t>(), n, all_ids.data<std::int64_t>());
  std::copy_n(gid.data<std::int64_t>(), g, all_ids.data<std::int64_t>() + n);
  Grids grids{all, all_ids, search, nullptr};
  return local_round(grids, queries, query_order(queries), max_points, r * r);
}

}  // namespace tessera
