#pragma once
// Benchmark cases of tessera-bench. A case measures at the rank count it is launched
// with and returns rows (meaningful on rank 0); its goals are computed from the rows
// of all rank counts once scripts/bench.sh has merged them.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "apps/bench/report.hpp"
#include "runtime/tensor/context.hpp"

namespace tessera::bench {

struct Options {
  std::map<std::string, std::string> kv;  // --key=value pairs
  double num(const std::string& k, double dflt) const;
  std::string str(const std::string& k, const std::string& dflt) const;
};

struct Case {
  std::string name, help;
  std::vector<int> rank_counts;  // what scripts/bench.sh launches it at
  std::vector<std::string> columns;
  std::function<json(Context&, const Options&)> run;
  std::function<json(const json& rows)> goals;
};

std::vector<Case> all_cases();
Case redistribute_case();
Case halo_case();
Case conv_case();
Case conv_kernel_case();
Case train_case();
Case io_case();

}  // namespace tessera::bench
