// tessera-prep generate heat: diffusion of a random initial field by explicit steps.
#include <iostream>

#include "apps/prep/common.hpp"
#include "io/output_file.hpp"
#include "apps/prep/heat.hpp"
#include "apps/prep/progress.hpp"

namespace tessera::prep {
namespace {

int run(Context& ctx, const cli::Args& a) {
  const std::vector<Index> grid = a.shape("grid");
  for (Index g : grid)
    TESSERA_CHECK(g >= 1, "--grid " << a.str("grid") << ": every extent must be at least 1");
  TESSERA_CHECK(grid.size() == 2 || grid.size() == 3,
                "--grid " << a.str("grid") << ": heat needs a 2-D or 3-D grid");
  const Index samples = a.integer("samples");
  TESSERA_CHECK(samples >= 1, "--samples must be at least 1");
  HeatParams p;
  p.field.seed = static_cast<std::uint64_t>(a.integer_in("seed", 0, kMaxSeed));
  p.field.modes = field_modes(a, grid);
  p.alpha = a.finite_above("alpha", 0);  // 0 made dt = inf and a NaN field
  p.cfl = a.num("cfl");
  p.steps = static_cast<int>(a.integer_in("steps", 0, kIntMax));
  TESSERA_CHECK(p.cfl > 0 && p.cfl <= 1, "--cfl must lie in (0, 1] for stable explicit steps");
  const Mesh mesh = grid_mesh(ctx.world(), grid, a.str("mesh"));
  const ShardSpec spec = grid_spec(mesh, grid);
  // Per cell: the two time levels with their halos, the sample kept, its float32 copy.
  check_grid_fits(mesh, spec, 40.0, "the heat solve");
  io::NewFile out(a.str("out"), ctx.world());  // renamed into place when complete
  io::File& f = out.file();
  io::schema::write_root(f, "tessera-prep generate heat");
  f.set_attr("/", "problem",
             std::string("u_t = alpha laplace(u) on [0,1]^d, u = 0 on the "
                         "boundary, explicit Euler steps; u0 a Gaussian random field"));
  const double dt = heat_dt(grid, p);
  f.set_attr("/", "seed", static_cast<std::int64_t>(p.field.seed));
  f.set_attr("/", "alpha", std::vector<double>{p.alpha});
  f.set_attr("/", "dt", std::vector<double>{dt});
  f.set_attr("/", "steps", static_cast<std::int64_t>(p.steps));
  f.set_attr("/", "time", std::vector<double>{dt * p.steps});
  f.set_attr("/", "cfl", std::vector<double>{p.cfl});
  f.set_attr("/", "modes", static_cast<std::int64_t>(p.field.modes));  // of u0
  create_grid_field(f, "u0", samples, spec, "u");
  create_grid_field(f, "u", samples, spec, "u");
  Index cells = 1;
  for (Index n : grid) cells *= n;
  Progress progress(ctx.world(), "heat", samples, 8.0 * static_cast<double>(cells),
                    a.flag("quiet"));
  for (Index n = 0; n < samples; ++n) {
    const HeatSample s = solve_heat(mesh, spec, p, static_cast<std::uint64_t>(n));
    write_grid_sample(f, "u0", n, spec, mesh, s.u0);
    write_grid_sample(f, "u", n, spec, mesh, s.u);
    progress.update(n + 1);
  }
  out.commit();
  if (ctx.rank() == 0 && !a.flag("quiet"))
    std::cerr << "[heat] wrote " << a.str("out") << ": " << samples << " samples, " << p.steps
              << " steps of dt " << dt << " on mesh " << mesh.str() << std::endl;
  return 0;
}

}  // namespace

Command generate_heat_command() {
  return {
      "generate heat",
      "tessera-prep generate heat --grid 64x64x64 --samples 4 --steps 100 --out F.h5",
      "Heat equation u_t = alpha laplace(u) on the unit square or cube, u = 0 on the boundary,\n"
      "by explicit Euler steps of the 5-/7-point Laplacian with one halo exchange per step.\n"
      "u0 is a Gaussian random field (identical at any rank count). Writes /fields/u0 and\n"
      "/fields/u (after the steps), each (N, 1, grid...).",
      {{"grid", "NxN[xN]", "grid of interior nodes", ""},
       {"samples", "N", "number of samples", "1"},
       {"steps", "N", "explicit time steps", "100"},
       {"seed", "S", "random seed", "1"},
       {"out", "FILE", "output HDF5 file", ""},
       {"alpha", "X", "diffusivity", "1"},
       {"cfl", "X", "dt as a fraction of the stability limit", "0.9"},
       {"modes", "K", "Fourier modes of u0, -K..K per dim", "6"},
       {"mesh", "SPEC", "rank mesh, e.g. x=2,y=2", "auto"},
       {"quiet", "", "no progress output", ""}},
      run};
}

}  // namespace tessera::prep
