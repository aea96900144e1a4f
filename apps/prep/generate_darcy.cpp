// tessera-prep generate darcy: log-normal permeability and the Darcy pressure solved by
// distributed conjugate gradients on the sharded grid.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#include "apps/prep/common.hpp"
#include "io/output_file.hpp"
#include "apps/prep/darcy.hpp"
#include "apps/prep/progress.hpp"

namespace tessera::prep {
namespace {

int run(Context& ctx, const cli::Args& a) {
  const std::vector<Index> grid = a.shape("grid");
  for (Index g : grid)
    TESSERA_CHECK(g >= 1, "--grid " << a.str("grid") << ": every extent must be at least 1");
  TESSERA_CHECK(grid.size() == 2 || grid.size() == 3,
                "--grid " << a.str("grid") << ": Darcy needs a 2-D or 3-D grid");
  const Index samples = a.integer("samples");
  TESSERA_CHECK(samples >= 1, "--samples must be at least 1");
  DarcyParams p;
  p.field.seed = static_cast<std::uint64_t>(a.integer_in("seed", 0, kMaxSeed));
  p.field.modes = field_modes(a, grid);
  p.sigma = a.finite_above("sigma", 0, true);
  p.tol = a.finite_above("tol", 0);
  p.max_iter = static_cast<int>(a.integer_in("max-iter", 1, kIntMax));
  const Mesh mesh = grid_mesh(ctx.world(), grid, a.str("mesh"));
  const ShardSpec spec = grid_spec(mesh, grid);
  // Per cell: k with its halo, the random field, CG's x, r, z, q, diagonal and direction,
  // the float32 copy written: about 12 doubles.
  check_grid_fits(mesh, spec, 96.0, "the Darcy solve");
  io::NewFile out(a.str("out"), ctx.world());  // renamed into place when complete
  io::File& f = out.file();
  io::schema::write_root(f, "tessera-prep generate darcy");
  f.set_attr("/", "problem",
             std::string("-div(k grad p) = f on [0,1]^d, p = 0 on the boundary, "
                         "k = exp(sigma g), g a unit-variance Gaussian random field"));
  f.set_attr("/", "seed", static_cast<std::int64_t>(p.field.seed));
  f.set_attr("/", "sigma", std::vector<double>{p.sigma});
  f.set_attr("/", "source", std::vector<double>{p.source});
  f.set_attr("/", "cg_tolerance", std::vector<double>{p.tol});
  f.set_attr("/", "cg_max_iter", static_cast<std::int64_t>(p.max_iter));
  f.set_attr("/", "modes", static_cast<std::int64_t>(p.field.modes));  // of the random field
  create_grid_field(f, "permeability", samples, spec, "k");
  create_grid_field(f, "pressure", samples, spec, "p");
  Index cells = 1;
  for (Index n : grid) cells *= n;
  Progress progress(ctx.world(), "darcy", samples, 8.0 * static_cast<double>(cells),
                    a.flag("quiet"));
  int max_it = 0;
  double max_res = 0;
  for (Index n = 0; n < samples; ++n) {
    const DarcySample s = solve_darcy(mesh, spec, p, static_cast<std::uint64_t>(n));
    // Every rank holds the same figures (all-reduced): one message, the same everywhere.
    TESSERA_CHECK(!s.k_overflow(),
                  "sample " << n << ": the permeability k = exp(sigma g) leaves double precision"
                            << " at --sigma " << a.str("sigma") << " (k spans " << s.k_min << " to "
                            << s.k_max << "): no pressure can be solved; give a smaller --sigma");
    if (s.residual > p.tol || !std::isfinite(s.residual)) {
      std::ostringstream os;
      os << "sample " << n << ": CG did not reach --tol " << a.str("tol") << " at --sigma "
         << a.str("sigma") << " (k spans " << s.k_min << " to " << s.k_max
         << "): the relative residual is " << s.residual << " after " << s.iterations
         << " iterations, its lowest " << s.best_residual << " at iteration " << s.best_iteration;
      // Case by case (the same figures on every rank): broke down or lost to round-off
      // after more iterations than unknowns (ill-conditioned: more iterations do not help),
      // still reaching new lows (more iterations), or neither said for sure.
      if (!std::isfinite(s.residual))
        os << ": CG broke down, the system is too ill-conditioned at this sigma; give a "
              "smaller --sigma";
      else if (s.still_falling())
        os << ", still falling: raise --max-iter (" << p.max_iter << ")";
      else if (static_cast<double>(s.iterations) >= static_cast<double>(cells))
        os << ": no progress over the last half of more iterations than the grid's " << cells
           << " unknowns, so more iterations (--max-iter) will not help; the system is too "
              "ill-conditioned at this sigma: give a smaller --sigma";
      else
        os << ": no progress over the last half of the iterations; the system may be too "
              "ill-conditioned at this sigma (give a smaller --sigma), or need more than "
           << p.max_iter << " iterations (--max-iter)";
      throw Error(os.str());
    }
    write_grid_sample(f, "permeability", n, spec, mesh, s.k.interior());
    write_grid_sample(f, "pressure", n, spec, mesh, s.p);
    max_it = std::max(max_it, s.iterations);
    max_res = std::max(max_res, s.residual);
    progress.update(n + 1);
  }
  out.commit();
  if (ctx.rank() == 0 && !a.flag("quiet"))
    std::cerr << "[darcy] wrote " << a.str("out") << ": " << samples << " samples on mesh "
              << mesh.str() << ", CG at most " << max_it
              << " iterations, relative residual <= " << max_res << std::endl;
  return 0;
}

}  // namespace

Command generate_darcy_command() {
  return {"generate darcy",
          "tessera-prep generate darcy --grid 256x256 --samples 16 --seed 1 --out F.h5",
          "Darcy flow -div(k grad p) = 1 on the unit square or cube, p = 0 on the boundary, on a\n"
          "grid of interior nodes. k = exp(sigma g) with g a Gaussian random field (a random\n"
          "Fourier-mode sum keyed by seed, sample and mode: identical at any rank count). The\n"
          "pressure comes from Jacobi-preconditioned conjugate gradients on the sharded grid\n"
          "(5-/7-point stencil, harmonic-mean face coefficients, one halo exchange per step).\n"
          "Writes /fields/permeability and /fields/pressure, each (N, 1, grid...).",
          {{"grid", "NxN[xN]", "grid of interior nodes", ""},
           {"samples", "N", "number of samples", "1"},
           {"seed", "S", "random seed", "1"},
           {"out", "FILE", "output HDF5 file", ""},
           {"modes", "K", "Fourier modes -K..K per dim", "6"},
           {"sigma", "X", "standard deviation of log k", "1"},
           {"tol", "X", "CG relative residual", "1e-8"},
           {"max-iter", "N", "CG iteration limit", "20000"},
           {"mesh", "SPEC", "rank mesh, e.g. x=2,y=2", "auto"},
           {"quiet", "", "no progress output", ""}},
          run};
}

}  // namespace tessera::prep
