// tessera-bench: strong/weak scaling and per-primitive benchmarks, JSON out.
//   tessera-bench CASE [--key=value ...] [--out=part.json]   (under mpirun)
//   tessera-bench merge CASE OUT.json PART.json...           (serial: table + goals)
//   tessera-bench ranks CASE                                 (rank counts the case needs)
#include <fstream>
#include <iostream>

#include "apps/bench/cases.hpp"
#include "decomp/error.hpp"

using namespace tessera;
using namespace tessera::bench;

namespace {
void usage() {
  std::cout << "usage: tessera-bench CASE [--key=value ...] [--out=FILE]\n"
               "       tessera-bench merge CASE OUT.json PART.json...\n"
               "       tessera-bench ranks CASE\ncases:\n";
  for (const auto& c : all_cases()) std::cout << "  " << c.name << ": " << c.help << '\n';
}

const Case& find_case(const std::string& name) {
  static const auto cases = all_cases();
  for (const auto& c : cases)
    if (c.name == name) return c;
  throw Error("unknown benchmark case '" + name + "' (tessera-bench --help lists them)");
}

int merge(int argc, char** argv) {
  if (argc < 5) throw Error("merge needs CASE OUT.json and at least one PART.json");
  const Case& c = find_case(argv[2]);
  json out = merge_parts(c.name, std::vector<std::string>(argv + 4, argv + argc));
  out["goals"] = c.goals(out["rows"]);
  std::ofstream(argv[3]) << out.dump(2) << '\n';
  std::cout << "benchmark " << c.name << '\n';
  print_table(out["rows"], c.columns);
  std::cout << '\n';
  print_table(out["goals"], {"name", "value", "op", "target", "met"});
  std::cout << "wrote " << argv[3] << '\n';
  return 0;
}
}  // namespace

double Options::num(const std::string& k, double d) const {
  auto it = kv.find(k);
  if (it == kv.end()) return d;
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    throw Error("option --" + k + "=" + it->second + " is not a number");
  }
}
std::string Options::str(const std::string& k, const std::string& d) const {
  auto it = kv.find(k);
  return it == kv.end() ? d : it->second;
}

std::vector<Case> tessera::bench::all_cases() {
  return {redistribute_case(), halo_case(), conv_kernel_case(), conv_case(), io_case(),
          train_case()};
}

int main(int argc, char** argv) {
  try {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
      usage();
      return argc < 2 ? 2 : 0;
    }
    const std::string first = argv[1];
    if (first == "merge") return merge(argc, argv);
    if (first == "ranks") {
      if (argc < 3) throw Error("ranks needs CASE");
      for (int n : find_case(argv[2]).rank_counts) std::cout << n << ' ';
      std::cout << '\n';
      return 0;
    }
    const Case& c = find_case(first);
    Options opt;
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      const auto eq = a.find('=');
      if (a.rfind("--", 0) != 0 || eq == std::string::npos)
        throw Error("argument '" + a + "' is not --key=value");
      opt.kv[a.substr(2, eq - 2)] = a.substr(eq + 1);
    }
    Context ctx(argc, argv);
    json rows = c.run(ctx, opt);
    if (ctx.rank() == 0) {
      json part = {{"case", c.name}, {"rows", rows}};
      const std::string out = opt.str("out", "");
      if (!out.empty()) std::ofstream(out) << part.dump(2) << '\n';
      print_table(rows, c.columns);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessera-bench: " << e.what() << std::endl;
    return 1;
  }
}
