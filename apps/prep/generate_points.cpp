// tessera-prep generate points: point clouds on a surface with a field on each point.
#include <iostream>

#include "apps/prep/common.hpp"
#include "io/output_file.hpp"
#include "apps/prep/points.hpp"
#include "apps/prep/progress.hpp"
#include "io/sharded.hpp"

namespace tessera::prep {
namespace {

int run(Context& ctx, const cli::Args& a) {
  const Index P = a.integer("points"), samples = a.integer("samples");
  TESSERA_CHECK(P >= 1 && samples >= 1, "--points and --samples must be at least 1");
  PointsParams p;
  p.seed = static_cast<std::uint64_t>(a.integer("seed"));
  p.surface = a.str("surface");
  p.noise = a.num("noise");
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
  f.create_dataset(io::schema::kFeatures, {samples, P, 1}, DType::f32, {1, chunk, 1});
  f.set_attr(io::schema::kFeatures, "variables", std::vector<std::string>{"f"});
  Progress progress(ctx.world(), "points", samples, 16.0 * static_cast<double>(P), a.flag("quiet"));
  Tensor xyz = Tensor::empty({1, e - b, 3}, DType::f32),
         val = Tensor::empty({1, e - b, 1}, DType::f32);
  for (Index n = 0; n < samples; ++n) {
    make_points(p, static_cast<std::uint64_t>(n), b, e, xyz.data<float>(), val.data<float>());
    io::write_box(f, io::schema::kCoords, Box({n, b, 0}, {n + 1, e, 3}), xyz,
                  Box::from_shape(xyz.shape()));
    io::write_box(f, io::schema::kFeatures, Box({n, b, 0}, {n + 1, e, 1}), val,
                  Box::from_shape(val.shape()));
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
          "point (point j of sample n depends only on seed, n and j). Writes /points/coords\n"
          "(N, P, 3) and /points/features (N, P, 1); each rank writes its share of the points.",
          {{"points", "P", "points per sample", ""},
           {"samples", "N", "number of samples", "1"},
           {"seed", "S", "random seed", "1"},
           {"out", "FILE", "output HDF5 file", ""},
           {"surface", "NAME", "torus or sphere", "torus"},
           {"noise", "X", "standard deviation along the normal", "0.01"},
           {"quiet", "", "no progress output", ""}},
          run};
}

}  // namespace tessera::prep
