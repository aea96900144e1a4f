#pragma once
// Benchmark cases of tessera-bench. A case measures at the rank count it is launched
// with and returns rows (meaningful on rank 0); its goals are computed from the rows
// of all rank counts once scripts/bench.sh has merged them.
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "apps/bench/report.hpp"
#include "apps/common/cli.hpp"
#include "decomp/error.hpp"
#include "runtime/tensor/context.hpp"

namespace tessera::bench {

struct Case {
  std::string name, help;
  std::vector<cli::Option> options;  // with their defaults; others are errors
  std::vector<int> rank_counts;      // what scripts/bench.sh launches it at
  std::vector<std::string> columns;
  std::function<json(Context&, const cli::Args&)> run;
  std::function<json(const json& rows)> goals;
};

// The counts every case takes the same way: --reps (timed repetitions) and --threads
// (OpenMP threads per rank), refused below 1 (0 crashed the timers and the libraries).
inline int reps_option(const cli::Args& opt, const std::string& name = "reps") {
  return static_cast<int>(opt.integer_in(name, 1, 1000000));
}
inline int threads_option(const cli::Args& opt) {
  return static_cast<int>(opt.integer_in("threads", 1, 4096));
}

// A size or count: an integer of at least `lo` (fractions, NaN and Inf refused, not cast).
inline Index size_option(const cli::Args& opt, const std::string& name, Index lo = 1) {
  return opt.integer_in(name, lo, std::numeric_limits<Index>::max());
}
inline int int_option(const cli::Args& opt, const std::string& name, int lo = 1) {
  return static_cast<int>(opt.integer_in(name, lo, std::numeric_limits<int>::max()));
}

// A 2-D grid "HxW" (the training-step benchmarks' grids): two extents of at least 1.
inline std::vector<Index> grid_option(const cli::Args& opt, const std::string& name) {
  const std::vector<Index> g = opt.shape(name);
  if (g.size() != 2 || g[0] < 1 || g[1] < 1)
    throw Error("option --" + name + "=" + opt.str(name) + ": a grid HxW of two extents >= 1");
  return g;
}

std::vector<Case> all_cases();
Case redistribute_case();
Case halo_case();
Case conv_case();
Case conv_kernel_case();
Case train_case();
Case io_case();
Case fft_case();
Case attention_case();
Case points_case();
Case scaling_case();

}  // namespace tessera::bench
