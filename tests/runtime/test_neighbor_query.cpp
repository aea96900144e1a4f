// Exact distributed kNN and ball queries against a brute-force serial search (indices in
// order, ties by global id) for uniform, clustered, surface and degenerate clouds
// (duplicates, a plane, fewer points than k, ranks without points) at every rank count: the answer
// does not depend on the partition.
#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "runtime/points/ghost_exchange.hpp"
#include "runtime/points/migration.hpp"
#include "runtime/points/neighbor_query.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"

using namespace tessera;

namespace {

std::vector<Point3> cloud(int kind) {
  std::mt19937 g(11 + kind);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> z(0, 1);
  std::vector<Point3> p;
  if (kind == 0)
    for (int i = 0; i < 2500; ++i) p.push_back({u(g), u(g), u(g)});
  else if (kind == 1)
    for (int i = 0; i < 2500; ++i) {
      const double s = i % 2 ? 0.002 : 0.2;
      p.push_back({0.5 + s * z(g), 0.3 + s * z(g), 0.7 + s * z(g)});
    }
  else if (kind == 2)  // duplicates: 40 distinct positions, each many times
    for (int i = 0; i < 1200; ++i) p.push_back({(i % 40) * 0.1, (i % 7) * 0.2, 0.0});
  else if (kind == 3)  // a plane
    for (int i = 0; i < 900; ++i) p.push_back({(i % 30) * 0.1, (i / 30) * 0.1, 1.0});
  else if (kind == 5)  // a sphere's surface: dense on a 2-D manifold, empty inside
    for (int i = 0; i < 2000; ++i) {
      const double zc = 2 * u(g) - 1, phi = 6.283185307179586 * u(g), s = std::sqrt(1 - zc * zc);
      p.push_back({0.5 + 0.4 * s * std::cos(phi), 0.5 + 0.4 * s * std::sin(phi), 0.5 + 0.4 * zc});
    }
  else  // fewer points than k
    p = {{0, 0, 0}, {1, 1, 1}, {0.5, 0, 0}};
  return p;
}

std::vector<std::pair<double, std::int64_t>> brute(const std::vector<Point3>& pts,
                                                   const Point3& q) {
  std::vector<std::pair<double, std::int64_t>> all;
  for (std::size_t j = 0; j < pts.size(); ++j) {
    double s = 0;
    for (int d = 0; d < 3; ++d) s += (pts[j][d] - q[d]) * (pts[j][d] - q[d]);
    all.push_back({s, static_cast<std::int64_t>(j)});
  }
  std::sort(all.begin(), all.end());
  return all;
}

// A cloud placed on the ranks: this rank's points before partitioning (a contiguous index
// range, or all on rank 0), the RCB layout, and the points and ids at their owners.
struct Placed {
  Index lo = 0, hi = 0;  // this rank's index range before partitioning
  Tensor xyz, ids;
  std::optional<SpatialLayout> layout;
  Tensor owned, owned_ids;
};

// Layouts the queries are checked on: RCB (regions tile space) and a Hilbert curve (regions
// are the owned points' bounding boxes, which may overlap).
enum class Kind { Rcb, Hilbert };

Placed place(MPI_Comm comm, const std::vector<Point3>& pts, bool all_on_rank0,
             Kind kind = Kind::Rcb) {
  const int P = test::world_size(), me = test::world_rank();
  const Index n = static_cast<Index>(pts.size());
  Placed c;
  c.lo = all_on_rank0 ? 0 : n * me / P;
  c.hi = all_on_rank0 ? (me == 0 ? n : 0) : n * (me + 1) / P;
  c.xyz = Tensor::empty({c.hi - c.lo, 3}, DType::f64);
  c.ids = Tensor::empty({c.hi - c.lo}, DType::i64);
  for (Index i = c.lo; i < c.hi; ++i) {
    for (int d = 0; d < 3; ++d)
      c.xyz.data<double>()[3 * (i - c.lo) + d] = pts[static_cast<std::size_t>(i)][d];
    c.ids.data<std::int64_t>()[i - c.lo] = i;
  }
  c.layout = kind == Kind::Rcb ? SpatialLayout::rcb(comm, c.xyz)
                               : SpatialLayout::sfc(comm, c.xyz, Curve::Hilbert);
  const Migration mig(comm, c.layout->owners(c.xyz));
  c.owned = mig.forward(c.xyz);
  c.owned_ids = mig.forward(c.ids);
  return c;
}

}  // namespace

TEST_CASE("distributed kNN and ball query equal a brute-force search") {
  MPI_Comm comm = test::harness_comm();
  for (Kind layout_kind : {Kind::Rcb, Kind::Hilbert})
    for (int kind = 0; kind < 6; ++kind)
      for (bool empty_ranks : {false, true}) {
        const auto pts = cloud(kind);
        const Index n = static_cast<Index>(pts.size());
        const Placed c = place(comm, pts, empty_ranks, layout_kind);
        const SpatialLayout& layout = *c.layout;
        const Tensor &xyz = c.xyz, &owned = c.owned, &owned_ids = c.owned_ids;
        const Index lo = c.lo, hi = c.hi;
        const Index k = 16;
        const NeighborLists knn = knn_query(comm, layout, owned, owned_ids, xyz, k);
        const double r = kind == 0 ? 0.1 : 0.15;
        const Index cap = 24;
        const NeighborLists ball = ball_query(comm, layout, owned, owned_ids, xyz, r, cap);
        bool knn_ok = true, ball_ok = true;
        for (Index qi = 0; qi < hi - lo; ++qi) {
          const auto want = brute(pts, pts[static_cast<std::size_t>(lo + qi)]);
          for (Index j = 0; j < k; ++j) {
            const std::int64_t w = j < n ? want[static_cast<std::size_t>(j)].second : -1;
            knn_ok = knn_ok && knn.ids.data<std::int64_t>()[qi * k + j] == w;
          }
          Index inside = 0;
          for (const auto& [d2, id] : want)
            if (d2 <= r * r) ++inside;
          for (Index j = 0; j < cap; ++j) {
            const std::int64_t w = j < inside ? want[static_cast<std::size_t>(j)].second : -1;
            ball_ok = ball_ok && ball.ids.data<std::int64_t>()[qi * cap + j] == w;
          }
        }
        INFO("cloud " << kind << (empty_ranks ? ", all points on rank 0 first" : "")
                      << (layout_kind == Kind::Rcb ? ", RCB" : ", Hilbert"));
        MPI_CHECK(knn_ok);
        MPI_CHECK(ball_ok);
      }
}

TEST_CASE("the ball query from owned + ghost points equals a brute-force search, no requests") {
  MPI_Comm comm = test::harness_comm();
  const int P = test::world_size(), me = test::world_rank();
  for (Kind layout_kind : {Kind::Rcb, Kind::Hilbert})
    for (int kind = 0; kind < 6; ++kind)
      for (bool empty_ranks : {false, true}) {
        const auto pts = cloud(kind);
        const Placed c = place(comm, pts, empty_ranks, layout_kind);
        const SpatialLayout& layout = *c.layout;
        const Tensor &owned = c.owned, &owned_ids = c.owned_ids;
        const double r = kind == 0 ? 0.1 : 0.15;
        // Ghosts of a larger radius serve a smaller ball too.
        for (const double ghost_r : {r, 1.5 * r}) {
          const GhostExchange gx(comm, layout, owned, ghost_r);
          const Tensor gxyz = gx.forward(owned), gids = gx.forward(owned_ids);
          const Index cap = 24;
          const NeighborLists ball =
              ball_query(layout, gx, owned, owned_ids, gxyz, gids, owned, r, cap);
          bool ok = ball.ids.shape(0) == owned.shape(0);
          for (Index qi = 0; ok && qi < owned.shape(0); ++qi) {
            const double* x = owned.data<double>() + 3 * qi;
            const auto want = brute(pts, {x[0], x[1], x[2]});
            Index inside = 0;
            for (const auto& [d2, id] : want)
              if (d2 <= r * r) ++inside;
            for (Index j = 0; j < cap; ++j) {
              const std::int64_t w = j < inside ? want[static_cast<std::size_t>(j)].second : -1;
              ok = ok && ball.ids.data<std::int64_t>()[qi * cap + j] == w;
            }
          }
          INFO("cloud " << kind << (empty_ranks ? ", all points on rank 0 first" : "")
                        << (layout_kind == Kind::Rcb ? ", RCB" : ", Hilbert")
                        << ", ghosts of radius " << ghost_r);
          MPI_CHECK(ok);
          // A radius past the ghosts', or a query outside the region, is refused (locally:
          // the query has no collective to hang).
          MPI_CHECK_ERROR(
              ball_query(layout, gx, owned, owned_ids, gxyz, gids, owned, 2 * ghost_r, cap),
              "passes the ghosts' radius");
          // Regions are unbounded at the domain's faces: outside mine is in another's.
          const auto away = std::find_if(pts.begin(), pts.end(), [&](const Point3& p) {
            return layout.region(me).distance2_to(p) > 0;
          });
          Tensor outside = Tensor::empty({1, 3}, DType::f64);
          if (away != pts.end()) std::copy_n(away->data(), 3, outside.data<double>());
          MPI_CHECK(away == pts.end() || test::has(test::error_of([&] {
                                                     ball_query(layout, gx, owned, owned_ids, gxyz,
                                                                gids, outside, r, cap);
                                                   }),
                                                   "outside this rank's region"));
          MPI_CHECK(P == 1 || kind == 4 || empty_ranks || away != pts.end());
        }
      }
}

TEST_CASE("the query rounds refuse points outside their rank's region, on every rank") {
  MPI_Comm comm = test::harness_comm();
  const auto pts = cloud(0);
  const Placed c = place(comm, pts, false, Kind::Hilbert);
  // This rank's owned points and one far outside every region (the Hilbert regions are the
  // owned points' bounding boxes).
  const Index n = c.owned.shape(0);
  Tensor bad = Tensor::empty({n + 1, 3}, DType::f64), bad_ids = Tensor::empty({n + 1}, DType::i64);
  std::copy_n(c.owned.data<double>(), 3 * n, bad.data<double>());
  std::copy_n(c.owned_ids.data<std::int64_t>(), n, bad_ids.data<std::int64_t>());
  for (int d = 0; d < 3; ++d) bad.data<double>()[3 * n + d] = 100.0;
  bad_ids.data<std::int64_t>()[n] = 1 << 30;
  MPI_CHECK_ERROR(knn_query(comm, *c.layout, bad, bad_ids, c.owned, 4),
                  "outside this rank's region");
  MPI_CHECK_ERROR(ball_query(comm, *c.layout, bad, bad_ids, c.owned, 0.1, 4),
                  "outside this rank's region");
  // A NaN query on the last rank alone: refused on every rank (kNN returned arbitrary
  // neighbours at d2 = nan).
  int P = 1, me = 0;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &me);
  Tensor queries = c.owned.clone();
  if (me == P - 1 && n > 0) queries.data<double>()[3 * (n - 1) + 1] = std::nan("");
  int last_has = me == P - 1 && n > 0;
  MPI_Allreduce(MPI_IN_PLACE, &last_has, 1, MPI_INT, MPI_MAX, comm);
  if (last_has) {
    MPI_CHECK_ERROR(knn_query(comm, *c.layout, c.owned, c.owned_ids, queries, 4),
                    "has a non-finite coordinate");
    MPI_CHECK_ERROR(ball_query(comm, *c.layout, c.owned, c.owned_ids, queries, 0.1, 4),
                    "has a non-finite coordinate");
  }
  MPI_CHECK(last_has == 1);
  // An argument bad on one rank alone (k = 0, a negative radius, a query of 2 columns):
  // refused on every rank, naming it, where the others had waited in the rounds.
  const bool odd_one = me == P - 1;
  MPI_CHECK_ERROR(knn_query(comm, *c.layout, c.owned, c.owned_ids, c.owned, odd_one ? 0 : 4),
                  "kNN: k = 0");
  MPI_CHECK_ERROR(
      ball_query(comm, *c.layout, c.owned, c.owned_ids, c.owned, odd_one ? -1.0 : 0.1, 4),
      "ball query: radius -1");
  const Tensor flat = odd_one ? Tensor::zeros({2, 2}, DType::f64) : c.owned;
  MPI_CHECK_ERROR(knn_query(comm, *c.layout, c.owned, c.owned_ids, flat, 4),
                  "queries are a contiguous host (n, 3) float64 tensor");
  // A negative id on the last rank alone (the lists' -1 marks a missing neighbour, so a point
  // with that id would be dropped from every list it is in) and ids of the wrong shape.
  if (last_has) {
    Tensor negative = c.owned_ids.clone();
    if (me == P - 1) negative.data<std::int64_t>()[n - 1] = -1;
    MPI_CHECK_ERROR(knn_query(comm, *c.layout, c.owned, negative, c.owned, 4),
                    "has the id -1; ids are >= 0");
    MPI_CHECK_ERROR(ball_query(comm, *c.layout, c.owned, negative, c.owned, 0.1, 4),
                    "has the id -1; ids are >= 0");
  }
  const Tensor column = odd_one ? c.owned_ids.reshape({n, 1}) : c.owned_ids;
  MPI_CHECK_ERROR(knn_query(comm, *c.layout, c.owned, column, c.owned, 4),
                  "ids are a contiguous host int64 tensor");
  // Repeated ids (ties are broken by id, so the lists would depend on the partition): each
  // rank's row numbers (the usual slip: they repeat across the ranks), and one id twice on
  // one rank. Refused on every rank, naming the id and where it is held.
  Tensor rows = Tensor::empty({n}, DType::i64);
  for (Index i = 0; i < n; ++i) rows.data<std::int64_t>()[i] = i;
  Index least = n;  // every rank holds row 0 when the fewest points are > 0
  MPI_Allreduce(MPI_IN_PLACE, &least, 1, MPI_INT64_T, MPI_MIN, comm);
  if (P > 1 && least > 0) {
    MPI_CHECK_ERROR(knn_query(comm, *c.layout, c.owned, rows, c.owned, 4),
                    "kNN: the point id 0 is given twice (row 0 of rank 0's points and row 0 of "
                    "rank 1's); ids must be unique across the ranks");
    MPI_CHECK_ERROR(ball_query(comm, *c.layout, c.owned, rows, c.owned, 0.1, 4),
                    "ball query: the point id 0 is given twice");
  }
  int last_has_two = me == P - 1 && n > 1;
  MPI_Allreduce(MPI_IN_PLACE, &last_has_two, 1, MPI_INT, MPI_MAX, comm);
  if (last_has_two) {
    Tensor twice = c.owned_ids.clone();
    if (me == P - 1) twice.data<std::int64_t>()[n - 1] = twice.data<std::int64_t>()[0];
    MPI_CHECK_ERROR(knn_query(comm, *c.layout, c.owned, twice, c.owned, 4), "is given twice");
  }
  // Valid but unequal k or max_points: a rank answers others' requests with its own, so a
  // smaller one there would drop true neighbours: refused.
  if (P > 1) {
    MPI_CHECK_ERROR(knn_query(comm, *c.layout, c.owned, c.owned_ids, c.owned, odd_one ? 3 : 4),
                    "kNN: ranks disagree on k");
    MPI_CHECK_ERROR(
        ball_query(comm, *c.layout, c.owned, c.owned_ids, c.owned, 0.1, odd_one ? 3 : 4),
        "ball query: ranks disagree on max_points");
  }
}

TEST_CASE("ghost exchange: exactly the points within r of my region; adjoint by dot product") {
  MPI_Comm comm = test::harness_comm();
  const int me = test::world_rank();
  const auto pts = cloud(1);
  const Index n = static_cast<Index>(pts.size());
  const Placed c = place(comm, pts, false);
  const SpatialLayout& layout = *c.layout;
  const Tensor &owned = c.owned, &owned_ids = c.owned_ids;
  for (double r : {0.02, 0.3}) {
    const GhostExchange gx(comm, layout, owned, r);
    const Tensor gids = gx.forward(owned_ids);
    // Brute force: every point owned elsewhere within r of my region.
    std::vector<std::int64_t> want,
        got(gids.data<std::int64_t>(), gids.data<std::int64_t>() + gids.numel());
    for (Index i = 0; i < n; ++i) {
      const int o = layout.owner_of(pts[static_cast<std::size_t>(i)]);
      if (o != me && layout.region(me).distance2_to(pts[static_cast<std::size_t>(i)]) <= r * r)
        want.push_back(i);
    }
    std::sort(got.begin(), got.end());
    MPI_CHECK(got == want);
    // <G x, y> == <x, G* y> over all ranks, float64.
    std::mt19937 g(static_cast<unsigned>(me) + 1);
    std::uniform_real_distribution<double> u(-1, 1);
    Tensor x = Tensor::empty({gx.owned(), 2}, DType::f64),
           y = Tensor::empty({gx.ghosts(), 2}, DType::f64);
    for (Index i = 0; i < x.numel(); ++i) x.data<double>()[i] = u(g);
    for (Index i = 0; i < y.numel(); ++i) y.data<double>()[i] = u(g);
    const Tensor gxv = gx.forward(x), gty = gx.adjoint(y);
    double lhs = 0, rhs = 0;
    for (Index i = 0; i < y.numel(); ++i) lhs += gxv.data<double>()[i] * y.data<double>()[i];
    for (Index i = 0; i < x.numel(); ++i) rhs += x.data<double>()[i] * gty.data<double>()[i];
    MPI_Allreduce(MPI_IN_PLACE, &lhs, 1, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Allreduce(MPI_IN_PLACE, &rhs, 1, MPI_DOUBLE, MPI_SUM, comm);
    MPI_CHECK(std::abs(lhs - rhs) <= 1e-12 * std::max(1.0, std::abs(lhs)));
  }
}
