// tessera-prep generate points: point clouds on a surface with a field on each point.
#include <iostream>

#include "apps/prep/common.hpp"
#include "io/finite.hpp"
#include "io/output_file.hpp"
#include "apps/prep/points.hpp"
#include "apps/prep/progress.hpp"
#include "io/sharded.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/points/migration.hpp"
#include "runtime/points/neighbor_query.hpp"

namespace tessera::prep {
namespace {

// The mean of the field over each point's k nearest points of the whole cloud (itself
// included, ties by index): the exact distributed kNN on an RCB layout of the points, the
// neighbours' values recomputed from their indices (a point is a function of its index).
std::vector<float> smoothed(MPI_Comm comm, const PointsParams& p, std::uint64_t sample, Index b,
                            const Tensor& xyz32, Index k) {
  const Index n = xyz32.shape(1);
  Tensor xyz = Tensor::empty({n, 3}, DType::f64), ids = Tensor::empty({n}, DType::i64);
  for (Index i = 0; i < n; ++i) {
    for (int d = 0; d < 3; ++d) xyz.data<double>()[3 * i + d] = xyz32.data<float>()[3 * i + d];
    ids.data<std::int64_t>()[i] = b + i;
  }
  const SpatialLayout layout = SpatialLayout::rcb(comm, xyz);
  const Migration mig(comm, layout.owners(xyz));
  const NeighborLists nb = knn_query(comm, layout, mig.forward(xyz), mig.forward(ids), xyz, k);
  std::vector<float> out(static_cast<std::size_t>(n));
  float c[3], v = 0;
  for (Index i = 0; i < n; ++i) {
    double sum = 0;
    Index count = 0;
    for (Index j = 0; j < k; ++j) {
      const std::int64_t id = nb.ids.data<std::int64_t>()[i * k + j];
      if (id < 0) continue;
      make_points(p, sample, id, id + 1, c, &v);
      sum += v;
      ++count;
    }
    out[static_cast<std::size_t>(i)] = static_cast<float>(sum / static_cast<double>(count));
  }
  return out;
}

int run(Context& ctx, const cli::Args& a) {
  const Index P = a.integer("points"), samples = a.integer("samples"), k = a.integer("smooth");
  TESSERA_CHECK(P >= 1 && samples >= 1, "--points and --samples must be at least 1");
  TESSERA_CHECK(k >= 0, "--smooth " << k << ": the neighbours to average, 0 for none");
  // More neighbours than points would average them all while the file said k.
  TESSERA_CHECK(
      k <= P, "--smooth " << k << " neighbours of a cloud of " << P << " points: at most --points");
  PointsParams p;
  p.seed = static_cast<std::uint64_t>(a.integer_in("seed", 0, kMaxSeed));
  p.surface = a.str("surface");
  p.noise = a.finite_above("noise", 0, true);
  TESSERA_CHECK(p.surface == "torus" || p.surface == "sphere",
                "--surface " << p.surface << ": torus or sphere");
  io::NewFile out(a.str("out"), ctx.world());  // renamed into place when complete
  io::File& f = out.file();
  io::schema::write_root(f, "tessera-prep generate points");
  f.set_attr("/", "surface", p.surface);
  f.set_attr("/", "seed", static_cast<std::int64_t>(p.seed));
  f.set_attr("/", "noise", std::vector<double>{p.noise});
  // One chunk per rank's share of one sample's points.
  const auto [b, e] = io::balanced_range(P, ctx.size(), ctx.rank());
  const Index chunk = std::max<Index>(1, io::balanced_range(P, ctx.size(), 0).second);
  f.create_dataset(io::schema::kCoords, {samples, P, 3}, DType::f32, {1, chunk, 3});
  const Index C = k > 0 ? 2 : 1;
  f.create_dataset(io::schema::kFeatures, {samples, P, C}, DType::f32, {1, chunk, C});
  f.set_attr(io::schema::kFeatures, "variables",
             k > 0 ? std::vector<std::string>{"f", "f_smooth"} : std::vector<std::string>{"f"});
  if (k > 0) f.set_attr("/", "smooth", static_cast<std::int64_t>(k));
  Progress progress(ctx.world(), "points", samples, 16.0 * static_cast<double>(P), a.flag("quiet"));
  Tensor xyz = Tensor::empty({1, e - b, 3}, DType::f32),
         val = Tensor::empty({1, e - b, 1}, DType::f32),
         feat = Tensor::empty({1, e - b, C}, DType::f32);
  for (Index n = 0; n < samples; ++n) {
    make_points(p, static_cast<std::uint64_t>(n), b, e, xyz.data<float>(), val.data<float>());
    // A noise so large that a coordinate leaves float32 is refused as such, on every rank.
    collective_check(ctx.world(), io::first_nonfinite(xyz) < 0 && io::first_nonfinite(val) < 0,
                     "--noise " + a.str("noise") + ": points of sample " + std::to_string(n) +
                         " leave float32's range (coordinates past 3.4e38): a smaller --noise");
    io::write_box(f, io::schema::kCoords, Box({n, b, 0}, {n + 1, e, 3}), xyz,
                  Box::from_shape(xyz.shape()));
    std::vector<float> smooth;
    if (k > 0) smooth = smoothed(ctx.world(), p, static_cast<std::uint64_t>(n), b, xyz, k);
    for (Index i = 0; i < e - b; ++i) {
      feat.data<float>()[i * C] = val.data<float>()[i];
      if (k > 0) feat.data<float>()[i * C + 1] = smooth[static_cast<std::size_t>(i)];
    }
    io::write_box(f, io::schema::kFeatures, Box({n, b, 0}, {n + 1, e, C}), feat,
                  Box::from_shape(feat.shape()));
    progress.update(n + 1);
  }
  out.commit();
  if (ctx.rank() == 0 && !a.flag("quiet"))
    std::cerr << "[points] wrote " << a.str("out") << ": " << samples << " clouds of " << P
              << " points on a " << p.surface << std::endl;
  return 0;
}

}  // namespace

Command generate_points_command() {
  return {"generate points",
          "tessera-prep generate points --points 100000 --samples 4 --out F.h5",
          "Point clouds on a torus or sphere with normal noise, and a smooth field value on each\n"
          "point (point j of sample n depends only on seed, n and j), and with --smooth K the\n"
          "field's mean over each point's K nearest points (exact distributed kNN): a target\n"
          "that needs neighbourhood information. Writes /points/coords (N, P, 3) and\n"
          "/points/features (N, P, 2) with variables f, f_smooth (f alone with --smooth 0);\n"
          "each rank writes its share of the points.",
          {{"points", "P", "points per sample", ""},
           {"samples", "N", "number of samples", "1"},
           {"seed", "S", "random seed", "1"},
           {"out", "FILE", "output HDF5 file", ""},
           {"surface", "NAME", "torus or sphere", "torus"},
           {"noise", "X", "standard deviation along the normal", "0.01"},
           {"smooth", "K", "neighbours averaged into f_smooth (0: no f_smooth)", "16"},
           {"quiet", "", "no progress output", ""}},
          run};
}

}  // namespace tessera::prep
