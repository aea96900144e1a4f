// Case "points": distributed neighbour queries on a point cloud, queries = the points.
// --points points, uniform in the unit cube, clustered, or on a sphere's surface (as a
// vehicle's surface mesh: dense on a 2-D manifold, empty around), each rank generating a contiguous
// index range (index-sharded, as read from a file). Per query kind (kNN with --k, and the
// ball query with r holding --ball points on average, at most --ball kept):
//  (a) Tessera (RCB layout + migration to owners + ghost exchange for the ball radius +
//      queries: kNN in two rounds, the ball query from owned + ghost points) against the
//      ring baseline (point_ring.hpp: a k-d tree per visiting block, as the goal defines
//      it) and a stronger ring searching each block with Tessera's grid hash, all timed
//      interleaved: ring / queries and ring / (partition + ghosts + queries) for both; every
//      answer is checked equal to both rings' (the run fails otherwise);
//  (b) E = T(1 rank) / (min(N, cores) x T(N ranks)) of partition + queries, 1 thread each;
//  (c) ghost points received (all ranks) against the surface estimate (interior face area of
//      the RCB regions in the cube x r x density), and the partition imbalance.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <numbers>
#include <optional>
#include <sstream>

#include "apps/bench/cases.hpp"
#include "apps/bench/point_ring.hpp"
#include "apps/bench/timing.hpp"
#include "decomp/error.hpp"
#include "runtime/points/ghost_exchange.hpp"
#include "runtime/points/migration.hpp"
#include "runtime/points/neighbor_query.hpp"

namespace tessera::bench {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64: any rank draws any index's numbers
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
double unit(std::uint64_t i, int j) {
  return static_cast<double>(mix(8 * i + static_cast<std::uint64_t>(j)) >> 11) * 0x1.0p-53;
}

// Point i: uniform; half uniform and half in 16 tight Gaussian blobs (clamped to the cube);
// or uniform on the sphere of radius 0.4 around the cube's centre.
Point3 point(std::uint64_t i, const std::string& cloud) {
  const Point3 u{unit(i, 0), unit(i, 1), unit(i, 2)};
  if (cloud == "surface") {
    const double z = 2 * u[0] - 1, phi = 2 * std::numbers::pi * u[1], s = std::sqrt(1 - z * z);
    return {0.5 + 0.4 * s * std::cos(phi), 0.5 + 0.4 * s * std::sin(phi), 0.5 + 0.4 * z};
  }
  if (cloud != "clustered" || unit(i, 3) < 0.5) return u;
  const std::uint64_t blob = (mix(i) >> 7) % 16;
  Point3 p;
  for (int d = 0; d < 3; ++d) {  // Box-Muller
    const double z = std::sqrt(-2 * std::log(1 - unit(i, 4 + d))) *
                     std::cos(2 * std::numbers::pi * u[static_cast<std::size_t>(d)]);
    p[static_cast<std::size_t>(d)] =
        std::clamp(0.1 + 0.8 * unit(1'000'000'007ull + blob, d) + 0.02 * z, 0.0, 1.0);
  }
  return p;
}

struct Cloud {
  Tensor xyz, ids;  // this rank's index range
};

Cloud generate(MPI_Comm comm, Index n, const std::string& cloud) {
  int P = 1, me = 0;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &me);
  const Index lo = n * me / P, hi = n * (me + 1) / P;
  Cloud c{Tensor::empty({hi - lo, 3}, DType::f64), Tensor::empty({hi - lo}, DType::i64)};
  for (Index i = lo; i < hi; ++i) {
    const Point3 p = point(static_cast<std::uint64_t>(i), cloud);
    for (int d = 0; d < 3; ++d) c.xyz.data<double>()[3 * (i - lo) + d] = p[d];
    c.ids.data<std::int64_t>()[i - lo] = i;
  }
  return c;
}

// Tessera's set-up: the layout, the points at their owners, the ghosts within r.
struct Owned {
  std::optional<SpatialLayout> layout;
  std::optional<Migration> mig;
  Tensor xyz, ids;
  std::optional<GhostExchange> gx;
  Tensor ghost_xyz, ghost_ids;
};

void partition(MPI_Comm comm, const Cloud& c, const std::string& layout, Owned& o) {
  if (layout == "rcb")
    o.layout = SpatialLayout::rcb(comm, c.xyz);
  else
    o.layout = SpatialLayout::sfc(comm, c.xyz, layout == "morton" ? Curve::Morton : Curve::Hilbert);
  o.mig.emplace(comm, o.layout->owners(c.xyz));
  o.xyz = o.mig->forward(c.xyz);
  o.ids = o.mig->forward(c.ids);
}

void ghosts(MPI_Comm comm, double r, Owned& o) {
  o.gx.emplace(comm, *o.layout, o.xyz, r);
  o.ghost_xyz = o.gx->forward(o.xyz);
  o.ghost_ids = o.gx->forward(o.ids);
}

// Surface estimate of the ghost count: the face area of every region inside the unit cube
// (faces on the cube's boundary have no neighbours) x r x points per unit volume.
double ghost_estimate(const SpatialLayout& layout, double r, double density) {
  double area = 0;
  for (int q = 0; q < layout.parts(); ++q) {
    const Region3& g = layout.region(q);
    Point3 lo, hi;
    for (int d = 0; d < 3; ++d)
      lo[d] = std::clamp(g.lo[d], 0.0, 1.0), hi[d] = std::clamp(g.hi[d], 0.0, 1.0);
    for (int d = 0; d < 3; ++d) {
      const double face = (hi[(d + 1) % 3] - lo[(d + 1) % 3]) * (hi[(d + 2) % 3] - lo[(d + 2) % 3]);
      area += face * ((g.lo[d] > 0 ? 1 : 0) + (g.hi[d] < 1 ? 1 : 0));
    }
  }
  return area * r * density;
}

double reduce(MPI_Comm comm, double v, MPI_Op op) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, comm);
  return out;
}

// Tessera's answers (at the owners) back in index order, compared with the ring's.
void check_equal(MPI_Comm comm, const Owned& o, const NeighborLists& got, const RingLists& want,
                 const std::string& what) {
  const Tensor back = o.mig->reverse(got.ids);
  const std::int64_t* b = back.data<std::int64_t>();
  Index bad = 0, first = -1;
  for (std::size_t i = 0; i < want.ids.size(); ++i)
    if (b[i] != want.ids[i] && bad++ == 0) first = static_cast<Index>(i) / want.keep;
  TESSERA_CHECK(static_cast<std::size_t>(back.numel()) == want.ids.size(),
                what << ": " << back.numel() << " answers, the ring has " << want.ids.size());
  const double all = reduce(comm, static_cast<double>(bad), MPI_SUM);
  TESSERA_CHECK(bad == 0 && all == 0, what << ": " << all
                                           << " neighbour ids differ from the ring's (here from "
                                           << "local query " << first << ")");
}

json run(Context& ctx, const cli::Args& opt) {
  omp_set_num_threads(1);
  const MPI_Comm comm = ctx.world();
  const Index n = size_option(opt, "points"), k = size_option(opt, "k"),
              ball = size_option(opt, "ball");
  const std::string cloud = opt.str("cloud");
  TESSERA_CHECK(cloud == "uniform" || cloud == "clustered" || cloud == "surface",
                "points: --cloud=" << cloud << " (uniform, clustered or surface)");
  TESSERA_CHECK(n >= 1 && k >= 1 && ball >= 1, "points: --points, --k, --ball must be >= 1");
  // A query of more neighbours than the cloud has measures no kNN.
  TESSERA_CHECK(k <= n && ball <= n,
                "points: --k=" << k << " and --ball=" << ball << " must not exceed --points=" << n);
  const int reps = reps_option(opt);
  // n (4/3) pi r^3 = ball: r holds `ball` points on average in a uniform cloud.
  const double r = std::cbrt(3.0 * static_cast<double>(ball) / (4 * std::numbers::pi * n));
  const Cloud c = generate(comm, n, cloud);

  Owned o;
  const std::string layout = opt.str("layout");
  TESSERA_CHECK(layout == "rcb" || layout == "hilbert" || layout == "morton",
                "points: --layout=" << layout << " (rcb, hilbert or morton)");
  const Timing tp = time_collective(comm, reps, 0, [&] { partition(comm, c, layout, o); });
  const Timing tg = time_collective(comm, reps, 0, [&] { ghosts(comm, r, o); });
  const double owned = static_cast<double>(o.xyz.shape(0));
  const double imbalance =
      reduce(comm, owned, MPI_MAX) / (reduce(comm, owned, MPI_SUM) / ctx.size());
  const double ghost_total = reduce(comm, static_cast<double>(o.gx->ghosts()), MPI_SUM);
  const double ghost_est = ghost_estimate(*o.layout, r, static_cast<double>(n));

  json rows = json::array();
  for (const bool knn : {true, false}) {
    const Index keep = knn ? k : ball;
    std::ostringstream what;
    what << (knn ? "kNN k=" + std::to_string(k) : "ball max " + std::to_string(ball));
    if (!knn) what << " r=" << std::setprecision(3) << r;
    NeighborLists got;
    RingLists want, want_grid;
    const double r2 = knn ? -1.0 : r * r;
    // One untimed round each first: every side's output buffers are then warm (a first
    // touch of Tessera's 256-512 MiB of result rows cost it 0.4-1.3 s of page faults).
    const std::vector<Timing> t = time_interleaved(
        comm, reps, 1,
        {[&] {
           // kNN in two rounds; the ball query from owned + ghost points, no requests.
           got = knn ? knn_query(comm, *o.layout, o.xyz, o.ids, o.xyz, k)
                     : ball_query(*o.layout, *o.gx, o.xyz, o.ids, o.ghost_xyz, o.ghost_ids, o.xyz,
                                  r, ball);
         },
         [&] { want = ring_query(comm, c.xyz, c.ids, keep, r2, RingSearch::KdTree); },
         [&] { want_grid = ring_query(comm, c.xyz, c.ids, keep, r2, RingSearch::Grid); }});
    const Timing &tt = t[0], &tr = t[1], &trg = t[2];
    check_equal(comm, o, got, want, what.str());
    check_equal(comm, o, got, want_grid, what.str() + " (grid ring)");
    const double total = tp.median_s + tg.median_s + tt.median_s;
    rows.push_back({{"what", what.str()},
                    {"cloud", cloud},
                    {"layout", layout},
                    {"points", n},
                    {"ranks", ctx.size()},
                    {"threads", 1},
                    {"cores", std::max(1, omp_get_num_procs())},
                    {"t_partition_s", tp.median_s},
                    {"t_ghosts_s", tg.median_s},
                    {"t_query_s", tt.median_s},
                    {"t_total_s", total},
                    {"t_ring_s", tr.median_s},
                    {"ring_over_query", tr.median_s / tt.median_s},
                    {"ring_over_total", tr.median_s / total},
                    {"t_ring_grid_s", trg.median_s},
                    {"ring_grid_over_query", trg.median_s / tt.median_s},
                    {"ring_grid_over_total", trg.median_s / total},
                    {"ghosts", ghost_total},
                    {"ghosts_est", ghost_est},
                    {"imbalance", imbalance},
                    {"correct", true}});
  }
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  for (const auto& r : rows) {
    const int P = int(r.at("ranks"));
    const std::string what = std::string(r.at("what")) + ", " + std::string(r.at("cloud")) + ", " +
                             std::to_string(P) + " ranks";
    if (P == 4) {
      g.push_back(
          goal(what + ": T(k-d tree ring) / T(queries)", r.at("ring_over_query"), ">=", 3.0));
      g.push_back(goal(what + ": T(k-d tree ring) / T(partition + ghosts + queries)",
                       r.at("ring_over_total"), ">=", 3.0));
    }
    if (P > 1 && r.at("what") == rows[0]["what"] && r.at("cloud") == "uniform" &&
        r.value("layout", "rcb") == "rcb") {  // per rank count
      g.push_back(goal(what + ": ghosts / surface estimate",
                       double(r.at("ghosts")) / double(r.at("ghosts_est")), "<=", 1.25));
      g.push_back(goal(what + ": imbalance (max / mean points)", r.at("imbalance"), "<=", 1.05));
    }
    if (P == 2)
      for (const auto& one : rows)
        if (one.at("what") == r.at("what") && int(one.at("ranks")) == 1) {
          const int used = std::min(P, int(r.value("cores", 1)));
          const double t1 = double(one.at("t_partition_s")) + double(one.at("t_query_s"));
          const double tn = double(r.at("t_partition_s")) + double(r.at("t_query_s"));
          g.push_back(goal(what + ": E = T(1 rank) / (" + std::to_string(used) +
                               " x T(2 ranks)) of partition + queries, 1 thread each",
                           t1 / (used * tn), ">=", 0.85));
        }
  }
  return g;
}

}  // namespace

Case points_case() {
  Case c;
  c.name = "points";
  c.help =
      "kNN and ball queries on a point cloud: RCB + ghosts + queries vs a ring of k-d trees (and "
      "of grid hashes)";
  c.options = {{"points", "N", "points (also the queries)", "1000000"},
               {"k", "K", "neighbours of the kNN query", "16"},
               {"ball", "B", "mean points in the ball query's radius, and the most kept", "32"},
               {"cloud", "KIND", "uniform, clustered or surface", "uniform"},
               {"layout", "KIND", "rcb, hilbert or morton (space-filling curve)", "rcb"},
               {"reps", "N", "timed repetitions", "1"}};
  c.rank_counts = {1, 2, 4};
  c.columns = {"what",
               "ranks",
               "t_partition_s",
               "t_ghosts_s",
               "t_query_s",
               "t_total_s",
               "t_ring_s",
               "ring_over_query",
               "ring_over_total",
               "t_ring_grid_s",
               "ring_grid_over_query",
               "ring_grid_over_total",
               "ghosts",
               "ghosts_est",
               "imbalance",
               "correct"};
  c.run = run;
  c.goals = goals;
  return c;
}

}  // namespace tessera::bench
