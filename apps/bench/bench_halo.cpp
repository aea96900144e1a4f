// Case "halo": ghost exchange of a 3-D float32 field (--n=256 per side) with 1- and
// 4-cell ghosts, against raw MPI_Isend/Irecv of the same messages between the same
// ranks in the same run. Bytes moved must equal the theoretical ghost volume, and after
// the timing (untimed) every ghost must hold its owner's value, cell by cell.
// --ghosts=neighbours (default): ghosts only where a neighbouring shard exists, as the
// sharded layers allocate them (zero padding at the domain edge is the kernel's); with
// --ghosts=uniform every side gets ghosts and open ones are zeroed (--open=zero) or kept.
// --method=in-place (default, derived datatypes over the padded buffer) or packed, for
// messages; --transport=shared (default: on-node peers through node-shared buffers) or
// messages. --grid=auto (default: Mesh::for_grid, fewest cache lines moved), surface (the
// minimum-surface grid) or AxBxC.
#include <algorithm>
#include <cstdint>
#include <sstream>

#include "apps/bench/cases.hpp"
#include "apps/bench/timing.hpp"
#include "decomp/grid_factor.hpp"
#include "runtime/comm/halo_exchange.hpp"
#include "runtime/comm/mpi_datatype.hpp"

namespace tessera::bench {
namespace {

// One word of `allowed` (any other picked the other choice silently).
std::string one_of(const cli::Args& opt, const std::string& name,
                   const std::vector<std::string>& allowed) {
  const auto picked = opt.choices(name, allowed);
  if (picked.size() != 1) throw Error("--" + name + " takes one of its choices, not a list");
  return *picked.begin();
}

// A cell's value in the check: a 24-bit hash of its global coordinates (exact in float32;
// a linear index mod 2^24 would repeat along a dim of a grid past 256^3, where a ghost taken
// from the wrong plane could match).
float cell_value(const Index* g) {
  std::uint64_t h = static_cast<std::uint64_t>(g[0]) * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<std::uint64_t>(g[1]) * 0xC2B2AE3D27D4EB4Full + (h >> 29);
  h ^= static_cast<std::uint64_t>(g[2]) * 0x165667B19E3779F9ull + (h >> 31);
  h ^= h >> 33;
  return static_cast<float>(h & ((1u << 24) - 1));
}

// One exchange into a padded buffer whose interior holds cell_value and whose ghosts hold
// -1: ghosts inside the domain must then hold their owners' values; ghosts past the
// domain's edge (uniform widths) 0 when open sides are zeroed, else still -1. The cells
// wrong on this rank.
Index wrong_ghosts(HaloExchange& ex, HaloTensor& h, const std::vector<Index>& shape,
                   bool zero_open) {
  const Tensor& p = h.padded();
  const Box& pb = h.padded_box();
  const Box domain = Box::from_shape(shape);
  float* v = p.data<float>();
  Index g[3], at = 0;
  for (g[0] = pb.lo[0]; g[0] < pb.hi[0]; ++g[0])
    for (g[1] = pb.lo[1]; g[1] < pb.hi[1]; ++g[1])
      for (g[2] = pb.lo[2]; g[2] < pb.hi[2]; ++g[2], ++at)
        v[at] = h.interior_box().contains(g) ? cell_value(g) : -1.f;
  ex.exchange(h);
  Index wrong = 0;
  at = 0;
  for (g[0] = pb.lo[0]; g[0] < pb.hi[0]; ++g[0])
    for (g[1] = pb.lo[1]; g[1] < pb.hi[1]; ++g[1])
      for (g[2] = pb.lo[2]; g[2] < pb.hi[2]; ++g[2], ++at) {
        const float want = domain.contains(g) ? cell_value(g) : zero_open ? 0.f : -1.f;
        wrong += v[at] != want;
      }
  return wrong;
}

json run(Context& ctx, const cli::Args& opt) {
  const Index n = size_option(opt, "n");
  const int reps = reps_option(opt);
  const std::vector<Index> shape = {n, n, n};
  const std::string grid = opt.str("grid");
  const std::string ghosts = one_of(opt, "ghosts", {"neighbours", "uniform"});
  const std::string open = one_of(opt, "open", {"zero", "keep"});
  const std::string method = one_of(opt, "method", {"in-place", "packed"});
  const std::string transport = one_of(opt, "transport", {"shared", "messages"});
  const Index min_run = opt.integer_in("min-run", 0, Index(1) << 30);
  std::vector<int> dims;
  if (grid == "surface") {
    dims = min_surface_grid(ctx.size(), shape);
  } else if (grid != "auto") {
    const std::vector<Index> g = cli::parse_shape(grid, "--grid");
    if (g.size() != 3)
      throw Error("--grid = '" + grid + "' is not a rank grid AxBxC (or auto, surface)");
    for (const Index e : g) {
      if (e < 1 || e > ctx.size())
        throw Error("--grid = '" + grid + "': each extent is 1.." + std::to_string(ctx.size()));
      dims.push_back(static_cast<int>(e));
    }
  }
  Mesh mesh = dims.empty() ? Mesh::for_grid(ctx.world(), shape) : Mesh(ctx.world(), dims);
  const ShardSpec spec(shape, {Shard(0), Shard(1), Shard(2)}, mesh);
  const Box domain = Box::from_shape(shape);
  json rows = json::array();
  const bool uniform = ghosts == "uniform";
  const BlockPartition& part = spec.partition();
  for (Index w : {Index(1), Index(4)}) {
    HaloWidths ws(std::vector<Index>(3, w), std::vector<Index>(3, w));
    if (!uniform) {
      std::vector<std::vector<Index>> l, r;
      for (int b = 0; b < part.num_blocks(); ++b) {
        const auto c = part.coords_of(b);
        l.emplace_back(3), r.emplace_back(3);
        for (int d = 0; d < 3; ++d) {
          l.back()[d] = c[d] > 0 ? w : 0;
          r.back()[d] = c[d] + 1 < part.grid()[d] ? w : 0;
        }
      }
      ws = HaloWidths::per_block(l, r);
    }
    HaloTensor h(mesh, spec, ws, DType::f32);
    HaloOptions o;
    o.open_fill = open == "keep" ? HaloOptions::OpenFill::Keep : HaloOptions::OpenFill::Zero;
    o.in_place = method == "in-place";
    o.in_place_min_run_bytes = static_cast<std::size_t>(min_run);
    o.node_shared = transport == "shared";
    HaloExchange ex(mesh, spec, ws, o);
    // Theoretical ghost volume: padded cells inside the domain that this rank does not own.
    const Index ghost = intersect(h.padded_box(), domain).volume() - h.interior_box().volume();
    double mine[2] = {static_cast<double>(ex.bytes_to_other_ranks(4)),
                      static_cast<double>(ghost * 4)};
    double tot[2];
    MPI_Allreduce(mine, tot, 2, MPI_DOUBLE, MPI_SUM, mesh.comm());
    // Raw point-to-point: the same messages between the same ranks, contiguous buffers.
    // Each message gets its own span of one contiguous buffer per direction.
    struct Msg {
      int peer;
      int count;
      Index offset;
    };
    auto lay_out = [](const std::vector<std::pair<int, Index>>& counts, Index& total) {
      std::vector<Msg> v;
      total = 0;
      for (const auto& [peer, c] : counts)
        v.push_back({peer, checked_count(c, "raw halo message"), total}), total += c;
      return v;
    };
    Index sn = 0, rn = 0;
    const std::vector<Msg> sends = lay_out(ex.send_counts(), sn),
                           recvs = lay_out(ex.recv_counts(), rn);
    std::vector<float> sbuf(static_cast<std::size_t>(sn), 1.f), rbuf(static_cast<std::size_t>(rn));
    std::vector<MPI_Request> req(sends.size() + recvs.size());
    const auto [t, raw] = time_interleaved(
        mesh.comm(), reps, 1, [&] { ex.exchange(h); },
        [&] {
          MPI_Request* r = req.data();
          for (const Msg& m : recvs)
            MPI_Irecv(rbuf.data() + m.offset, m.count, MPI_FLOAT, m.peer, 5, ex.comm(), r++);
          for (const Msg& m : sends)
            MPI_Isend(sbuf.data() + m.offset, m.count, MPI_FLOAT, m.peer, 5, ex.comm(), r++);
          MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
        });
    TESSERA_CHECK(h.padded().is_contiguous() && h.padded().ndim() == 3,
                  "halo bench: the padded buffer is not one contiguous 3-D block");
    Index wrong = wrong_ghosts(ex, h, shape, o.open_fill == HaloOptions::OpenFill::Zero);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, mesh.comm());
    const int P = mesh.size();
    rows.push_back({{"ranks", P},
                    {"grid", std::to_string(mesh.dim(0)) + "x" + std::to_string(mesh.dim(1)) + "x" +
                                 std::to_string(mesh.dim(2))},
                    {"field", shape_str(shape)},
                    {"ghost", w},
                    {"ghosts", uniform ? "uniform" : "neighbours"},
                    {"transport", o.node_shared ? "shared" : "messages"},
                    {"method", o.in_place ? "in-place" : "packed"},
                    {"MiB_moved", tot[0] / (1 << 20)},
                    {"MiB_theory", tot[1] / (1 << 20)},
                    {"t_halo_ms", t.median_s * 1e3},
                    {"t_p2p_ms", raw.median_s * 1e3},
                    {"GBps_halo", tot[0] / t.median_s / 1e9},
                    {"GBps_p2p", tot[0] / raw.median_s / 1e9},
                    {"ratio", raw.median_s / t.median_s},
                    {"bytes_equal", tot[0] == tot[1]},
                    {"wrong_ghosts", wrong},
                    {"correct", wrong == 0}});
  }
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  bool equal = true, correct = true;
  int maxp = 0;
  for (const auto& r : rows) {
    equal = equal && r.at("bytes_equal").get<bool>();
    correct = correct && r.at("correct").get<bool>();
    maxp = std::max(maxp, r.at("ranks").get<int>());
  }
  g.push_back(goal("bytes moved == theoretical ghost volume, all rows", equal ? 1 : 0, "==", 1));
  g.push_back(goal("every ghost holds its owner's value, all rows", correct ? 1 : 0, "==", 1));
  for (const auto& r : rows)
    if (r.at("ranks").get<int>() == maxp && r.at("ghost").get<int>() == 4)
      g.push_back(
          goal("halo vs MPI point-to-point, " + std::to_string(maxp) + " ranks, 4-cell ghosts",
               r.at("ratio").get<double>(), ">=", 0.8));
  return g;
}

}  // namespace

Case halo_case() {
  return {"halo",
          "ghost exchange of a 3-D float32 field (--n=256) with 1- and 4-cell ghosts vs raw p2p",
          {{"n", "N", "grid side", "256"},
           {"reps", "N", "timed repetitions", "15"},
           {"grid", "SPEC", "rank grid: auto, surface or AxBxC", "auto"},
           {"ghosts", "KIND", "neighbours or uniform", "neighbours"},
           {"open", "KIND", "open sides with uniform ghosts: zero or keep", "zero"},
           {"method", "KIND", "in-place or packed", "in-place"},
           {"min-run", "BYTES", "shortest contiguous run sent in place", "64"},
           {"transport", "KIND", "shared or messages", "shared"}},
          {2, 4, 8},
          {"ranks", "grid", "field", "ghost", "ghosts", "transport", "method", "MiB_moved",
           "MiB_theory", "t_halo_ms", "t_p2p_ms", "GBps_halo", "GBps_p2p", "ratio", "bytes_equal",
           "correct"},
          run,
          goals};
}

}  // namespace tessera::bench
