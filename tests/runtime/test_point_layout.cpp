// The collective RCB and space-filling-curve (Hilbert, Morton) layouts and point migration:
// every rank builds the same layout from its own points (no gather); every point has one
// owner, inside that owner's region; the imbalance is <= 1.05 for uniform and strongly
// clustered clouds, by count and by weight;
// migration sends each point to its owner in a fixed order and reverse() restores every row
// bitwise.
#include <algorithm>
#include <cstring>
#include <random>

#include "runtime/points/index_gather.hpp"
#include "runtime/points/migration.hpp"
#include "runtime/points/spatial_layout.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"

using namespace tessera;

namespace {

std::vector<Point3> cloud(bool clustered, std::size_t n) {
  std::mt19937 g(clustered ? 7 : 8);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> z(0, 1);
  std::vector<Point3> p(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!clustered || i % 10 == 0)
      p[i] = {u(g), u(g), u(g)};
    else {
      const double s = i % 3 == 0 ? 0.001 : 0.05;
      const double c = i % 3 == 0 ? 0.2 : 0.7;
      p[i] = {c + s * z(g), c + s * z(g), 0.5 + s * z(g)};
    }
  }
  return p;
}

enum class Kind { Rcb, Hilbert, Morton };

SpatialLayout make_layout(Kind kind, MPI_Comm comm, const Tensor& coords,
                          const Tensor& weights = {}) {
  if (kind == Kind::Rcb) return SpatialLayout::rcb(comm, coords, weights);
  return SpatialLayout::sfc(comm, coords, kind == Kind::Hilbert ? Curve::Hilbert : Curve::Morton,
                            weights);
}

}  // namespace

TEST_CASE("collective RCB and SFC layouts: one layout everywhere, balanced; migration") {
  MPI_Comm comm = test::harness_comm();
  const int P = test::world_size(), me = test::world_rank();
  for (Kind kind : {Kind::Rcb, Kind::Hilbert, Kind::Morton})
    for (bool clustered : {false, true})
      for (bool weighted : {false, true}) {
        const std::size_t n = 12000;
        const auto pts = cloud(clustered, n);
        std::vector<double> wt(n, 1.0);
        std::mt19937 g(3);
        std::uniform_real_distribution<double> u(0.2, 2.0);
        if (weighted)
          for (auto& x : wt) x = u(g);
        // This rank's contiguous range of the global ids.
        const Index lo = static_cast<Index>(n) * me / P, hi = static_cast<Index>(n) * (me + 1) / P;
        Tensor coords = Tensor::empty({hi - lo, 3}, DType::f64),
               ids = Tensor::empty({hi - lo}, DType::i64);
        Tensor weights = Tensor::empty({hi - lo}, DType::f64);
        for (Index i = lo; i < hi; ++i) {
          for (int d = 0; d < 3; ++d)
            coords.data<double>()[3 * (i - lo) + d] = pts[static_cast<std::size_t>(i)][d];
          ids.data<std::int64_t>()[i - lo] = i;
          weights.data<double>()[i - lo] = wt[static_cast<std::size_t>(i)];
        }
        const SpatialLayout layout = make_layout(kind, comm, coords, weighted ? weights : Tensor());
        INFO("layout " << static_cast<int>(kind) << ", " << (clustered ? "clustered" : "uniform")
                       << (weighted ? ", weighted" : ""));
        // The same owners of every global point on every rank; inside the owner's region.
        std::vector<double> part_weight(static_cast<std::size_t>(P), 0.0);
        unsigned long long checksum = 0;  // wraps modulo 2^64 (unsigned: defined)
        bool inside = true;
        for (std::size_t i = 0; i < n; ++i) {
          const int o = layout.owner_of(pts[i]);
          checksum = checksum * 31 + static_cast<unsigned long long>(o);
          part_weight[static_cast<std::size_t>(o)] += wt[i];
          inside = inside && layout.region(o).distance_to(pts[i]) == 0.0;
        }
        unsigned long long mn = checksum, mx = checksum;
        MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm);
        MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
        MPI_CHECK(mn == mx);
        MPI_CHECK(inside);
        double top = 0, sum = 0;
        for (double x : part_weight) top = std::max(top, x), sum += x;
        INFO("imbalance " << top / (sum / P));
        MPI_CHECK(top / (sum / P) <= 1.05);
        // Migration to the owners and back.
        const Migration mig(comm, layout.owners(coords));
        const Tensor got = mig.forward(coords), got_ids = mig.forward(ids);
        bool mine = true, ordered = true;
        for (Index i = 0; i < got.shape(0); ++i) {
          const Point3 p{got.data<double>()[3 * i], got.data<double>()[3 * i + 1],
                         got.data<double>()[3 * i + 2]};
          mine = mine && layout.owner_of(p) == me;
          if (i > 0)
            ordered =
                ordered && got_ids.data<std::int64_t>()[i] > got_ids.data<std::int64_t>()[i - 1];
        }
        MPI_CHECK(mine);
        MPI_CHECK(ordered);  // by source rank, then source order: increasing global ids here
        const Index expect = static_cast<Index>(std::count_if(
            pts.begin(), pts.end(), [&](const Point3& p) { return layout.owner_of(p) == me; }));
        MPI_CHECK(got.shape(0) == expect);
        const Tensor back = mig.reverse(got);
        MPI_CHECK(std::memcmp(back.raw(), coords.raw(), coords.nbytes()) == 0);
        MPI_CHECK(std::memcmp(mig.reverse(got_ids).raw(), ids.raw(), ids.nbytes()) == 0);
      }
}

TEST_CASE("layouts of degenerate clouds and bad input") {
  MPI_Comm comm = test::harness_comm();
  // Every point the same, and a rank with no points at all: still one owner per point.
  const Index n = test::world_rank() == 0 ? 0 : 50;
  Tensor same = Tensor::empty({n, 3}, DType::f64);
  for (Index i = 0; i < 3 * n; ++i) same.data<double>()[i] = 0.25;
  for (Kind kind : {Kind::Rcb, Kind::Hilbert, Kind::Morton}) {
    const SpatialLayout l = make_layout(kind, comm, same);
    const Migration m(comm, l.owners(same));
    long long total = m.received();
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, comm);
    MPI_CHECK(total == 50LL * (test::world_size() - 1));
    // No points anywhere: a layout all the same.
    const SpatialLayout e = make_layout(kind, comm, Tensor::empty({0, 3}, DType::f64));
    MPI_CHECK(e.parts() == test::world_size());
  }
  Tensor bad = Tensor::empty({1, 2}, DType::f64);
  bool refused = false;
  try {
    SpatialLayout::rcb(comm, bad);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("(n, 3) float64") != std::string::npos;
  }
  MPI_CHECK(refused);
  // A negative weight on the last rank alone: refused on every rank, under both layouts
  // (the layouts came out silently unbalanced).
  Tensor w = Tensor::empty({n}, DType::f64);
  for (Index i = 0; i < n; ++i) w.data<double>()[i] = 1.0;
  if (test::world_rank() == test::world_size() - 1 && n > 0) w.data<double>()[n - 1] = -2.0;
  if (test::world_size() > 1 || n > 0)
    for (Kind kind : {Kind::Rcb, Kind::Hilbert})
      MPI_CHECK_ERROR(make_layout(kind, comm, same, w), "is -2, not a finite amount >= 0");
  // A cloud at the scale of 1e-300: distinct points at squared distance 0 (neighbour answers
  // differed between rank counts), refused on every rank; at 1e-150 it is laid out.
  for (const double scale : {1e-300, 1e-150}) {
    Tensor tiny = Tensor::empty({n, 3}, DType::f64);
    for (Index i = 0; i < 3 * n; ++i)
      tiny.data<double>()[i] = scale * static_cast<double>((i * 7919) % 101) / 101.0;
    for (Kind kind : {Kind::Rcb, Kind::Hilbert, Kind::Morton}) {
      if (scale < 1e-200 && test::world_size() > 1) {  // rank 0 holds none
        MPI_CHECK_ERROR(make_layout(kind, comm, tiny), "squared distances between them underflow");
      } else if (scale > 1e-200) {
        MPI_CHECK(make_layout(kind, comm, tiny).parts() == test::world_size());
      }
    }
  }
}

TEST_CASE("migration and index gather refuse one rank's bad input on every rank, no hang") {
  // Each check failed the last rank alone, and the others waited for it in the exchange.
  MPI_Comm comm = test::harness_comm();
  const int P = test::world_size(), me = test::world_rank();
  const bool last = me == P - 1;
  std::vector<int> dest(3, me);
  if (last) dest[1] = P;
  MPI_CHECK_ERROR(Migration(comm, dest), "migration: destination rank " + std::to_string(P));
  const Migration m(comm, std::vector<int>(3, (me + 1) % P));
  MPI_CHECK_ERROR(m.forward(Tensor::zeros({last ? 2 : 3, 4}, DType::f64)),
                  "migration: forward takes 3 rows");
  MPI_CHECK(m.forward(Tensor::zeros({3, 4}, DType::f64)).shape(0) == 3);
  // Rows of another shape (or type) on one rank: the exchange's byte counts would differ.
  if (P > 1)
    MPI_CHECK_ERROR(m.forward(Tensor::zeros({3, last ? 5 : 4}, DType::f64)),
                    "ranks disagree on the rows' element type and shape");

  // Index gather: rank r holds rows [2 r, 2 r + 2).
  std::vector<Index> offsets;
  for (int r = 0; r <= P; ++r) offsets.push_back(2 * r);
  std::vector<std::int64_t> wanted = {0, 2 * P - 1, -1};
  if (last) wanted.push_back(2 * P);
  MPI_CHECK_ERROR(IndexGather(comm, offsets, wanted),
                  "index " + std::to_string(2 * P) + " outside");
  wanted.resize(3);
  std::vector<Index> other = offsets;
  if (last && P > 1) other[1] = 1;
  if (P > 1) MPI_CHECK_ERROR(IndexGather(comm, other, wanted), "ranks disagree on the offsets");
  const IndexGather g(comm, offsets, wanted);
  MPI_CHECK_ERROR(g.forward(Tensor::zeros({last ? 1 : 2, 3}, DType::f64)),
                  "index gather: forward takes the 2 held rows");
  MPI_CHECK_ERROR(g.adjoint(Tensor::zeros({last ? 4 : 3, 3}, DType::f64)),
                  "index gather: adjoint takes 3");
  if (P > 1)
    MPI_CHECK_ERROR(g.forward(Tensor::zeros({2, 3}, last ? DType::f32 : DType::f64)),
                    "ranks disagree on the rows' element type");
  // Still usable after the refusals.
  Tensor rows = Tensor::empty({2, 1}, DType::f64);
  rows.data<double>()[0] = 2.0 * me, rows.data<double>()[1] = 2.0 * me + 1;
  const Tensor got = g.forward(rows);
  MPI_CHECK(got.data<double>()[0] == 0.0 && got.data<double>()[1] == 2.0 * P - 1 &&
            got.data<double>()[2] == 0.0);
}
