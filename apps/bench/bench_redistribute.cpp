// Case "redistribute": Shard(0) -> Shard(1) of a 3-D float32 tensor against a raw
// MPI_Alltoall of the same bytes in the same run. Both move (P-1)/P of each rank's
// data; the ratio of their times is the figure of merit.
#include <algorithm>
#include <cmath>

#include "apps/bench/cases.hpp"
#include "apps/bench/timing.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera::bench {
namespace {

json run(Context& ctx, const cli::Args& opt) {
  const double mib = opt.finite_above("mib", 0);
  const int reps = reps_option(opt);
  Mesh mesh = Mesh::line(ctx.world());
  const int P = mesh.size();
  // (n, n, 256) float32, n a multiple of 8 chosen so the tensor holds at least `mib` MiB.
  const Index w = 256;
  Index n = static_cast<Index>(std::ceil(std::sqrt(mib * 1024 * 1024 / 4 / w)));
  // A multiple of 8 P: every rank holds n / P rows and sends the raw all-to-all's equal
  // share to each peer (MPI_Alltoall takes one count for all ranks).
  n = (n + 8 * P - 1) / (8 * P) * (8 * P);
  const std::vector<Index> shape = {n, n, w};
  const ShardSpec a(shape, {Shard(0), Replicate(), Replicate()}, mesh);
  const ShardSpec b(shape, {Replicate(), Shard(0), Replicate()}, mesh);
  Tensor local = Tensor::empty(a.local_shape(mesh.coords()), DType::f32);
  // Each cell holds its global linear index mod 1000 (exact in float32).
  const Index base = a.local_box(mesh.coords()).lo[0] * n * w;
  for (Index i = 0; i < local.numel(); ++i)
    local.data<float>()[i] = static_cast<float>((base + i) % 1000);
  const ShardTensor x = ShardTensor::unchecked(mesh, a, local);
  const double bytes = static_cast<double>(numel_of(shape)) * 4;

  // Raw alltoall of the same per-rank bytes: local / P to every peer.
  const Index per_peer = local.numel() / P;
  Tensor sbuf = Tensor::empty({per_peer * P}, DType::f32),
         rbuf = Tensor::empty({per_peer * P}, DType::f32);
  sbuf.copy_from(local.reshape({local.numel()}).view(Box({0}, {per_peer * P})));
  const Timing raw = time_collective(mesh.comm(), reps, 1, [&] {
    MPI_Alltoall(sbuf.raw(), static_cast<int>(per_peer), MPI_FLOAT, rbuf.raw(),
                 static_cast<int>(per_peer), MPI_FLOAT, mesh.comm());
  });
  json rows = json::array();
  for (auto [m, name] :
       {std::pair{Transport::InPlace, "derived-types"}, std::pair{Transport::Packed, "packed"}}) {
    ShardTensor y;
    const Timing t = time_collective(mesh.comm(), reps, 1, [&] { y = x.redistribute(b, m); });
    // Check every cell, untimed: a fast wrong answer is no result.
    const Box yb = y.local_box();
    bool ok = y.local().shape() == yb.shape();
    const float* yp = y.local().data<float>();
    for (Index i = 0; ok && i < yb.extent(0); ++i)
      for (Index j = 0; j < yb.extent(1); ++j) {
        const Index g0 = ((yb.lo[0] + i) * n + yb.lo[1] + j) * w;
        const float* row = yp + (i * yb.extent(1) + j) * w;
        for (Index k = 0; k < w; ++k) ok = ok && row[k] == static_cast<float>((g0 + k) % 1000);
      }
    int bad = ok ? 0 : 1, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, mesh.comm());
    const double moved = bytes * (P - 1) / P;  // bytes that leave their rank
    rows.push_back({{"ranks", P},
                    {"method", name},
                    {"shape", shape_str(shape)},
                    {"MiB", bytes / (1 << 20)},
                    {"t_redist_ms", t.median_s * 1e3},
                    {"t_alltoall_ms", raw.median_s * 1e3},
                    {"GBps_redist", P > 1 ? moved / t.median_s / 1e9 : 0.0},
                    {"GBps_alltoall", P > 1 ? moved / raw.median_s / 1e9 : 0.0},
                    {"ratio", raw.median_s / t.median_s},
                    {"correct", anybad == 0}});
  }
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  for (const auto& r : rows) {
    if (r.at("method") != "derived-types" || r.at("ranks").get<int>() < 2) continue;
    g.push_back(goal("Shard(0)->Shard(1) vs MPI_Alltoall, " +
                         std::to_string(r.at("ranks").get<int>()) + " ranks, " +
                         r.at("shape").get<std::string>() + " f32",
                     r.at("correct").get<bool>() ? r.at("ratio").get<double>() : 0.0, ">=", 0.85));
  }
  return g;
}

}  // namespace

Case redistribute_case() {
  return {"redistribute",
          "Shard(0)->Shard(1) of a 3-D float32 tensor (--mib=256) vs raw MPI_Alltoall",
          {{"mib", "N", "tensor size in MiB", "256"}, {"reps", "N", "timed repetitions", "7"}},
          {2, 4},
          {"ranks", "method", "shape", "MiB", "t_redist_ms", "t_alltoall_ms", "GBps_redist",
           "GBps_alltoall", "ratio", "correct"},
          run,
          goals};
}

}  // namespace tessera::bench
