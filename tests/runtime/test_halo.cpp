#include <chrono>
#include <complex>
#include <random>
#include <thread>
#include <tuple>

#include "decomp/halo_geometry.hpp"
#include "runtime/comm/halo_exchange.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/helpers.hpp"

using namespace tessera;

namespace {
struct Config {
  std::vector<Index> shape, left, right;
  std::vector<bool> periodic;
  std::vector<Placement> dims;
  std::vector<std::vector<Index>> sizes;
};

// Random 3-D configs on `mesh`: dim d sharded over axis d, uneven or empty shards,
// asymmetric widths up to 3 (wider than thin shards), random periodicity.
Config random_config(std::mt19937& rng, const Mesh& mesh) {
  Config c;
  c.dims.assign(3, Replicate());
  c.sizes.resize(3);
  for (int d = 0; d < 3; ++d) {
    c.shape.push_back(1 + static_cast<Index>(rng() % 7));
    c.left.push_back(static_cast<Index>(rng() % 4));
    c.right.push_back(static_cast<Index>(rng() % 4));
    c.periodic.push_back(rng() % 2 == 0);
  }
  for (int a = 0; a < mesh.ndim() && a < 3; ++a) {
    if (mesh.names()[a] == "data") continue;
    c.dims[a] = Shard(a);
    if (rng() % 2) c.sizes[a] = test::random_sizes(rng, c.shape[a], mesh.dim(a));
  }
  return c;
}

// Uniform widths (c.left, c.right) on even trials; on odd ones every block draws its own
// widths up to 3, as layers whose halo differs per rank use them.
HaloWidths widths_for(std::mt19937& rng, const Config& c, const ShardSpec& spec, int trial) {
  if (trial % 2 == 0) return HaloWidths(c.left, c.right);
  std::vector<std::vector<Index>> l, r;
  for (int b = 0; b < spec.partition().num_blocks(); ++b) {
    l.emplace_back();
    r.emplace_back();
    for (int d = 0; d < 3; ++d) {
      l.back().push_back(static_cast<Index>(rng() % 4));
      r.back().push_back(static_cast<Index>(rng() % 4));
    }
  }
  return HaloWidths::per_block(l, r);
}

// The value the padded cell at global point g must hold: its wrapped global linear
// index, or `open` where an open boundary leaves it without an owner.
std::int64_t expected(const Config& c, const std::vector<Index>& g, std::int64_t open) {
  Index lin = 0;
  for (int d = 0; d < 3; ++d) {
    Index x = g[d];
    const Index L = c.shape[d];
    if (x < 0 || x >= L) {
      if (!c.periodic[d]) return open;
      x = ((x % L) + L) % L;
    }
    lin = lin * L + x;
  }
  return lin * 3;  // test::reference(i64, seed 0) holds 3 * linear index
}

// Whether holds(padded tensor, i, want) for every padded cell i of h, want being the value
// expected() gives there.
template <class Holds>
bool every_padded_cell(const HaloTensor& h, const Config& c, std::int64_t open, Holds holds) {
  const Box pb = h.padded_box();
  const Tensor p = h.padded();
  bool ok = true;
  std::vector<Index> g(3);
  for (Index i = 0; i < pb.volume(); ++i) {
    delinearize(pb, i, g.data());
    ok = ok && holds(p, i, expected(c, g, open));
  }
  return ok;
}

// Whether every padded cell of h (int64) holds `scale` times the value expected() gives.
bool holds_expected(const HaloTensor& h, const Config& c, std::int64_t open,
                    std::int64_t scale = 1) {
  return every_padded_cell(h, c, open, [&](const Tensor& p, Index i, std::int64_t want) {
    return p.data<std::int64_t>()[i] == scale * want;
  });
}

double dot_local(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  double s = 0;
  for (Index i = 0; i < x.numel(); ++i) s += x.data<double>()[i] * y.data<double>()[i];
  return s;
}
}  // namespace

TEST_CASE("Every ghost cell holds the global index it stands for", "[halo]") {
  std::mt19937 rng(17);
  int checked = 0;
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (int trial = 0; trial < 10; ++trial) {
      const Config c = random_config(rng, mesh);
      const ShardSpec spec(c.shape, c.dims, mesh, {}, c.sizes);
      const Tensor ref = test::reference(c.shape, DType::i64);
      const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
      const HaloWidths widths = widths_for(rng, c, spec, trial);
      // Messages (node_shared off): every message in place (derived datatypes), hybrid
      // (runs of 3+ cells in place, the rest packed), every message packed. Node-shared
      // buffers for every peer (group 0), or for pairs of ranks only (group 2: the rest
      // travel as messages, in place or packed). Open ghosts zeroed or kept.
      using Fill = HaloOptions::OpenFill;
      for (auto [fill, in_place, min_run, shared, group] :
           {std::tuple{Fill::Zero, true, 0, false, 0}, std::tuple{Fill::Keep, true, 0, false, 0},
            std::tuple{Fill::Zero, true, 24, false, 0}, std::tuple{Fill::Keep, true, 24, false, 0},
            std::tuple{Fill::Zero, false, 0, false, 0}, std::tuple{Fill::Keep, false, 0, false, 0},
            std::tuple{Fill::Zero, true, 24, true, 0}, std::tuple{Fill::Keep, true, 24, true, 0},
            std::tuple{Fill::Zero, true, 24, true, 2}, std::tuple{Fill::Keep, false, 0, true, 2}}) {
        HaloTensor h = HaloTensor::from_shard(st, widths);
        // Ghosts start at a marker, so an unfilled cell shows.
        Tensor p = h.padded();
        for (Index i = 0; i < p.numel(); ++i) p.data<std::int64_t>()[i] = -7;
        h.interior().copy_from(st.local());
        HaloOptions o;
        o.periodic = c.periodic;
        o.open_fill = fill;
        o.in_place = in_place;
        o.in_place_min_run_bytes = static_cast<std::size_t>(min_run);
        o.node_shared = shared;
        o.node_group_ranks = group;
        HaloExchange ex(mesh, spec, widths, o);
        ex.exchange(h);
        const bool ok = holds_expected(h, c, fill == HaloOptions::OpenFill::Zero ? 0 : -7);
        INFO("mesh " << mesh.str() << " spec " << spec.str() << " left " << shape_str(h.left())
                     << " right " << shape_str(h.right()) << " per-block " << !widths.uniform()
                     << " periodic " << c.periodic[0] << c.periodic[1] << c.periodic[2]
                     << " in place " << in_place << " min run " << min_run << " shared " << shared
                     << " group " << group);
        MPI_REQUIRE(ok);
        ++checked;
      }
    }
  }
  MPI_REQUIRE(checked > 0);
}

TEST_CASE("complex128 ghosts (16-byte elements) through node-shared buffers and messages",
          "[halo]") {
  std::mt19937 rng(29);
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (int trial = 0; trial < 4; ++trial) {
      const Config c = random_config(rng, mesh);
      const ShardSpec spec(c.shape, c.dims, mesh, {}, c.sizes);
      // Real part 3 x the linear index, imaginary part its negative.
      Tensor ref = Tensor::empty(c.shape, DType::c128);
      for (Index i = 0; i < ref.numel(); ++i)
        ref.data<std::complex<double>>()[i] = {3.0 * static_cast<double>(i),
                                               -3.0 * static_cast<double>(i)};
      const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
      const HaloWidths widths = widths_for(rng, c, spec, trial);
      for (const bool shared : {true, false}) {
        HaloTensor h = HaloTensor::from_shard(st, widths);
        h.interior().copy_from(st.local());
        HaloOptions o;
        o.periodic = c.periodic;
        o.node_shared = shared;
        HaloExchange ex(mesh, spec, widths, o);
        ex.exchange(h);
        const bool ok = every_padded_cell(h, c, 0, [](const Tensor& p, Index i, std::int64_t want) {
          const auto w = static_cast<double>(want);
          return p.data<std::complex<double>>()[i] == std::complex<double>(w, -w);
        });
        INFO("mesh " << mesh.str() << " spec " << spec.str() << " shared " << shared);
        MPI_REQUIRE(ok);
      }
    }
  }
}

TEST_CASE("Adjoint: <H x, y> == <x, H* y> in float64", "[halo]") {
  std::mt19937 rng(23);
  std::mt19937 local_rng(1000 + test::world_rank());  // differs per rank: real data
  std::uniform_real_distribution<double> u(-1, 1);
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (int trial = 0; trial < 8; ++trial) {
      const Config c = random_config(rng, mesh);
      const ShardSpec spec(c.shape, c.dims, mesh, {}, c.sizes);
      HaloOptions o;
      o.periodic = c.periodic;
      o.deterministic = trial % 4 < 2;
      // Messages, node-shared buffers for all peers, or for pairs of ranks only.
      o.node_shared = trial % 3 != 0;
      o.node_group_ranks = trial % 3 == 2 ? 2 : 0;
      const HaloWidths widths = widths_for(rng, c, spec, trial);
      HaloExchange ex(mesh, spec, widths, o);
      HaloTensor x(mesh, spec, widths, DType::f64), y(mesh, spec, widths, DType::f64);
      Tensor xi = x.interior();
      Tensor xv = Tensor::empty(xi.shape(), DType::f64);
      for (Index i = 0; i < xv.numel(); ++i) xv.data<double>()[i] = u(local_rng);
      xi.copy_from(xv);
      for (Index i = 0; i < y.padded().numel(); ++i) y.padded().data<double>()[i] = u(local_rng);
      const double lhs_local = [&] {
        ex.exchange(x);
        return dot_local(x.padded(), y.padded());
      }();
      ex.exchange_adjoint(y);
      const double rhs_local = dot_local(xv, y.interior());
      double both[2] = {lhs_local, rhs_local}, sum[2];
      MPI_Allreduce(both, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      INFO("mesh " << mesh.str() << " spec " << spec.str() << " <Hx,y>=" << sum[0]
                   << " <x,H*y>=" << sum[1]);
      MPI_REQUIRE(std::abs(sum[0] - sum[1]) <= 1e-12 * std::max(1.0, std::abs(sum[0])));
      // After the adjoint every ghost is zero.
      const Box pb = y.padded_box(), ib = y.interior_box();
      bool zero = true;
      std::vector<Index> g(3);
      for (Index i = 0; i < pb.volume(); ++i) {
        delinearize(pb, i, g.data());
        if (!ib.contains(g.data())) zero = zero && y.padded().data<double>()[i] == 0.0;
      }
      MPI_REQUIRE(zero);
    }
  }
}

TEST_CASE("Deterministic adjoint is bitwise reproducible", "[halo]") {
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  // Wide periodic halos on a thin domain: many contributions land on the same cells.
  const std::vector<Index> shape = {5, 4, 3}, left = {3, 1, 2}, right = {2, 2, 1};
  const ShardSpec spec(shape, {Shard(0), Replicate(), Replicate()}, mesh);
  std::mt19937 rng(5 + test::world_rank());
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor y0 =
      Tensor::empty(HaloTensor(mesh, spec, left, right, DType::f64).padded().shape(), DType::f64);
  for (Index i = 0; i < y0.numel(); ++i) y0.data<double>()[i] = u(rng) * 1e3;
  for (bool shared : {false, true}) {
    HaloOptions o;
    o.periodic = {true, true, false};
    o.deterministic = true;
    o.node_shared = shared;
    HaloExchange ex(mesh, spec, left, right, o);
    Tensor first;
    bool same = true;
    for (int run = 0; run < 4; ++run) {
      HaloTensor y(mesh, spec, left, right, DType::f64);
      y.padded().copy_from(y0);
      ex.exchange_adjoint(y);
      if (run == 0)
        first = y.padded().clone();
      else
        same = same && test::same(first, y.padded());
    }
    INFO("node shared " << shared);
    MPI_REQUIRE(same);
  }
}

TEST_CASE("Node-shared buffers: a fast rank does not repack before its readers are done",
          "[halo]") {
  // Odd ranks dawdle before finish(), so even ranks reach the next begin() (and would
  // overwrite their shared send buffer) while odd ones still have to read it.
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape = {3 * test::world_size(), 4, 5}, w = {2, 1, 0};
  const ShardSpec spec(shape, {Shard(0), Replicate(), Replicate()}, mesh);
  const Tensor ref = test::reference(shape, DType::i64);
  const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
  HaloOptions o;
  o.periodic = {true, false, true};
  HaloExchange ex(mesh, spec, w, w, o);
  HaloTensor h = HaloTensor::from_shard(st, w, w);
  const Config c{shape, w, w, o.periodic, {}, {}};
  bool ok = true;
  for (std::int64_t round = 1; round <= 6; ++round) {
    // Round r: every owned cell holds r times its reference value.
    Tensor in = h.interior();
    const Tensor src = st.local().contiguous();
    Tensor scaled = Tensor::empty(src.shape(), DType::i64);
    for (Index i = 0; i < src.numel(); ++i)
      scaled.data<std::int64_t>()[i] = round * src.data<std::int64_t>()[i];
    in.copy_from(scaled);
    if (round % 2 == 0) {  // forward and adjoint share the buffers: mix them in
      HaloTensor a = HaloTensor::from_shard(st, w, w);
      ex.exchange_adjoint(a);
    }
    ex.begin(h);
    if (mesh.rank() % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ex.finish();
    ok = ok && holds_expected(h, c, 0, round);
  }
  MPI_REQUIRE(ok);
}

TEST_CASE("Work between begin() and finish() leaves the exchange exact", "[halo]") {
  Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, {12, 10});
  const std::vector<Index> shape = {12, 10, 2}, w = {2, 1, 0};
  const ShardSpec spec(shape, {Shard(0), Shard(1), Replicate()}, mesh);
  const Tensor ref = test::reference(shape, DType::i64);
  const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
  HaloTensor h = HaloTensor::from_shard(st, w, w);
  HaloOptions o;
  o.periodic = {true, false, false};
  HaloExchange ex(mesh, spec, w, w, o);
  ex.begin(h);
  // Interior work while messages are in flight: reads only owned cells.
  std::int64_t interior_sum = 0;
  const Tensor in = h.interior().contiguous();
  for (Index i = 0; i < in.numel(); ++i) interior_sum += in.data<std::int64_t>()[i];
  ex.finish();
  std::int64_t expect = 0;
  for (Index i = 0; i < st.local().numel(); ++i) expect += st.local().data<std::int64_t>()[i];
  MPI_REQUIRE(interior_sum == expect);
  const Box pb = h.padded_box();
  MPI_REQUIRE(holds_expected(h, Config{shape, w, w, o.periodic, {}, {}}, 0));
  // Cells received plus open cells are exactly the ghost volume.
  const auto geo = cached_halo_geometry(spec.partition(), HaloWidths(w, w), o.periodic);
  const HaloPlan& plan = geo->plan(spec.partition().id_of({mesh.coords()[0], mesh.coords()[1], 0}));
  const Index ghost = pb.volume() - h.interior_box().volume();
  MPI_REQUIRE(ex.cells_received() + plan.open_cells == ghost);
}

TEST_CASE("Halo exchange errors are clear", "[halo]") {
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const ShardSpec spec({6, 3}, {Shard(0), Replicate()}, mesh);
  HaloExchange ex(mesh, spec, {1, 0}, {1, 0});
  HaloTensor other(mesh, spec, {2, 0}, {1, 0}, DType::f32);
  MPI_REQUIRE(test::has(test::error_of([&] { ex.exchange(other); }), "ghost widths differ"));
  HaloTensor b(mesh, spec, {1, 0}, {1, 0}, DType::bf16);
  MPI_REQUIRE(test::has(test::error_of([&] { ex.exchange_adjoint(b); }), "cannot add bfloat16"));
}

TEST_CASE("begin() is local: skipped and reordered exchanges do not block", "[halo]") {
  const int P = test::world_size(), rank = test::world_rank();
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  // Two blocks hold all cells, the rest are empty: ranks without messages skip exchange().
  std::vector<Index> sizes(static_cast<std::size_t>(P), 0);
  sizes[0] = 2;
  if (P > 1) sizes[1] = 2;
  const ShardSpec thin({P > 1 ? 4 : 2, 3}, {Shard(0), Replicate()}, mesh, {}, {sizes, {}});
  HaloExchange skip(mesh, thin, {0, 0}, {1, 0});
  HaloTensor t(mesh, thin, {0, 0}, {1, 0}, DType::f32);
  if (skip.cells_received() + skip.cells_sent() > 0) skip.exchange(t);
  // Two exchanges begun in rank-dependent order, then finished.
  const ShardSpec s({Index(4 * P), 3}, {Shard(0), Replicate()}, mesh);
  HaloOptions o;
  o.periodic = {true, false};
  HaloExchange a(mesh, s, {1, 0}, {1, 0}, o), b(mesh, s, {2, 0}, {2, 0}, o);
  const Tensor ref = test::reference(s.global_shape(), DType::i64);
  const ShardTensor st = ShardTensor::scatter(mesh, rank == 0 ? ref : Tensor(), s);
  HaloTensor x = HaloTensor::from_shard(st, {1, 0}, {1, 0});
  HaloTensor y = HaloTensor::from_shard(st, {2, 0}, {2, 0});
  if (rank % 2 == 0) {
    a.begin(x);
    b.begin(y);
  } else {
    b.begin(y);
    a.begin(x);
  }
  a.finish();
  b.finish();
  bool ok = true;
  for (const HaloTensor* h : {&x, &y}) {
    const Box pb = h->padded_box();
    std::vector<Index> g(2);
    for (Index i = 0; i < pb.volume(); ++i) {
      delinearize(pb, i, g.data());
      const Index L = s.global_shape()[0];
      const Index wrapped = ((g[0] % L) + L) % L;
      ok = ok && h->padded().data<std::int64_t>()[i] == 3 * (wrapped * 3 + g[1]);
    }
  }
  MPI_REQUIRE(ok);
}

TEST_CASE("Without room in the node's shared memory the exchange uses messages", "[halo]") {
  Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape = {Index(3 * test::world_size()), 4, 5}, w = {1, 2, 0};
  const ShardSpec spec(shape, {Shard(0), Replicate(), Replicate()}, mesh);
  const Tensor ref = test::reference(shape, DType::i64);
  const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
  HaloOptions o;
  o.periodic = {true, true, false};
  const Config c{shape, w, w, o.periodic, {}, {}};
  for (const char* free_bytes : {"", "64"}) {  // the real store; a store with 64 bytes free
    if (*free_bytes)
      setenv("TESSERA_NODE_SHARED_FREE_BYTES", free_bytes, 1);
    else
      unsetenv("TESSERA_NODE_SHARED_FREE_BYTES");
    HaloExchange ex(mesh, spec, w, w, o);
    unsetenv("TESSERA_NODE_SHARED_FREE_BYTES");
    INFO("free bytes '" << free_bytes << "'");
    MPI_REQUIRE(ex.node_shared() == (*free_bytes == 0));
    HaloTensor h = HaloTensor::from_shard(st, w, w);
    ex.exchange(h);
    MPI_REQUIRE(holds_expected(h, c, 0));
  }
}

TEST_CASE("begin(direction) runs one plan both ways; the chosen transports are reported",
          "[halo]") {
  Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, {12, 10});
  const std::vector<Index> shape = {12, 10, 2}, w = {2, 1, 0};
  const ShardSpec spec(shape, {Shard(0), Shard(1), Replicate()}, mesh);
  const Tensor ref = test::reference(shape, DType::i64);
  const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
  const std::vector<bool> periodic = {true, false, false};
  for (bool node_shared : {false, true}) {
    for (bool in_place : {false, true}) {
      HaloOptions o;
      o.periodic = periodic;
      o.node_shared = node_shared;
      o.in_place = in_place;
      o.in_place_min_run_bytes = 0;
      HaloExchange ex(mesh, spec, w, w, o);
      // Forward through begin(t, Direction::Forward) + finish() == exchange().
      HaloTensor a = HaloTensor::from_shard(st, w, w), b = HaloTensor::from_shard(st, w, w);
      ex.begin(a, Direction::Forward);
      ex.finish();
      ex.exchange(b);
      MPI_REQUIRE(holds_expected(a, Config{shape, w, w, periodic, {}, {}}, 0));
      MPI_REQUIRE(test::same(a.padded(), b.padded()));
      // Every message went by the transport the options allow, and says so (one collective
      // check: ranks have different numbers of messages).
      bool allowed = true;
      for (const auto& [peer, t] : ex.last_transports()) {
        if (ex.node_shared() && peer != test::world_rank())
          allowed = allowed && t == Transport::NodeShared;
        else if (in_place)  // but messages longer than a piece are packed and cut
          allowed = allowed && (t == Transport::InPlace || t == Transport::NodeShared ||
                                (mpi_count_limit() < 12 * 10 * 2 && t == Transport::Packed));
        else
          allowed = allowed && (t == Transport::Packed || t == Transport::NodeShared);
      }
      INFO("shared " << node_shared << " in place " << in_place << ": " << ex.describe());
      MPI_REQUIRE(allowed);
      MPI_REQUIRE(ex.describe().rfind("forward:", 0) == 0);
      // Adjoint through begin(t, Direction::Adjoint) + finish() == exchange_adjoint().
      ex.begin(a, Direction::Adjoint);
      ex.finish();
      ex.exchange_adjoint(b);
      MPI_REQUIRE(test::same(a.padded(), b.padded()));
      MPI_REQUIRE(ex.describe().rfind("adjoint:", 0) == 0);
      bool packed = true;
      for (const auto& pt : ex.last_transports())
        packed = packed && (pt.second == Transport::Packed || pt.second == Transport::NodeShared);
      MPI_REQUIRE(packed);
    }
  }
}
