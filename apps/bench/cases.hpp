#pragma once
// Benchmark cases of tessera-bench. A case measures at the rank count it is launched
// with and returns rows (meaningful on rank 0); its goals are computed from the rows
// of all rank counts once scripts/bench.sh has merged them.
#include <functional>
#include <string>
#include <vector>

#include "apps/bench/report.hpp"
#include "apps/common/cli.hpp"
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
