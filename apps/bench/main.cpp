// tessera-bench: strong/weak scaling and per-primitive benchmarks, JSON out.
//   tessera-bench CASE [--key=value ...] [--out=part.json]   (under mpirun)
//   tessera-bench merge CASE OUT.json PART.json...           (serial: table + goals)
//   tessera-bench ranks CASE                                 (rank counts the case needs)
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <iostream>

#include "apps/bench/cases.hpp"
#include "apps/common/report_errors.hpp"
#include "decomp/error.hpp"
#include "runtime/comm/collective_error.hpp"

using namespace tessera;
using namespace tessera::bench;

namespace {
// A JSON file, or an error naming it (an unwritable --out must not pass silently).
void write_json(const std::string& path, const json& j) {
  std::ofstream f(path);
  f << j.dump(2) << '\n';
  f.close();
  if (!f) throw Error("cannot write '" + path + "'");
}

void usage() {
  std::cout << "usage: tessera-bench CASE [--key=value ...] [--out=FILE]   (under mpirun)\n"
               "       tessera-bench merge CASE OUT.json PART.json...\n"
               "       tessera-bench ranks CASE\ncases (`tessera-bench CASE --help` lists the "
               "options of each):\n";
  for (const auto& c : all_cases()) std::cout << "  " << c.name << ": " << c.help << '\n';
}

const Case& find_case(const std::string& name) {
  static const auto cases = all_cases();
  for (const auto& c : cases)
    if (c.name == name) return c;
  throw Error("unknown benchmark case '" + name + "' (tessera-bench --help lists them)");
}

int merge(const std::vector<std::string>& args) {
  const cli::Args a(args, {});
  if (a.help()) {
    std::cout << cli::help_text("tessera-bench merge CASE OUT.json PART.json...",
                                "Merges the rows of a case's runs (one PART.json per rank "
                                "count) into OUT.json with\nthe case's goals, and prints both "
                                "as tables.",
                                {});
    return 0;
  }
  const auto& p = a.positional();
  if (p.size() < 3) throw Error("merge needs CASE OUT.json and at least one PART.json");
  const Case& c = find_case(p[0]);
  for (std::size_t i = 2; i < p.size(); ++i)
    if (std::filesystem::weakly_canonical(p[i]) == std::filesystem::weakly_canonical(p[1]))
      throw Error("bench merge: the output " + p[1] + " is also a part: it would be overwritten");
  json out = merge_parts(c.name, std::vector<std::string>(p.begin() + 2, p.end()));
  // A goal over no rows would read as met ("all rows ..." of none).
  if (out["rows"].empty())
    throw Error("bench merge: the parts hold no rows: no goal can be judged (nothing written)");
  try {
    out["goals"] = c.goals(out["rows"]);
  } catch (const json::exception& e) {
    throw Error("bench merge: a row of the parts lacks a value the " + c.name +
                " goals read (a part of another version?): " + e.what());
  }
  write_json(p[1], out);
  std::cout << "benchmark " << c.name << '\n';
  print_table(out["rows"], c.columns);
  std::cout << '\n';
  print_table(out["goals"], {"name", "value", "op", "target", "met"});
  std::cout << "wrote " << p[1] << '\n';
  return 0;
}

int ranks(const std::vector<std::string>& args) {
  const cli::Args a(args, {});
  if (a.help()) {
    std::cout << cli::help_text("tessera-bench ranks CASE",
                                "Prints the rank counts scripts/bench.sh launches CASE at.", {});
    return 0;
  }
  if (a.positional().size() != 1) throw Error("ranks needs CASE");
  for (int n : find_case(a.positional()[0]).rank_counts) std::cout << n << ' ';
  std::cout << '\n';
  return 0;
}

// One run of a case at the rank count it is launched with; rank 0 prints the rows. Errors
// end through failure::conclude (apps/common/report_errors.hpp): printed once, and a rank
// that fails alone (a memory limit passed on one rank) ends the job within the deadline.
int run_case(Context& ctx, const std::string& name, const std::vector<std::string>& args) {
  const Case& c = find_case(name);
  std::vector<cli::Option> options = c.options;
  options.push_back({"out", "FILE", "write the rows as JSON, a part for merge", ""});
  // scripts/bench.sh adds its own --out (and --which, --models for capacity) after the
  // user's options: the last one counts.
  const cli::Args a(args, options, cli::Overrides::Reject, cli::Repeats::LastWins);
  if (a.help()) {
    if (ctx.rank() == 0)
      std::cout << cli::help_text("tessera-bench " + c.name + " [options]   (under mpirun)", c.help,
                                  options);
    return 0;
  }
  if (!a.positional().empty())
    throw Error("unexpected argument '" + a.positional()[0] + "' (see --help)");
  // --out is tried before the run (a folder, a missing folder, an empty name), not after
  // minutes of timing whose results it would then lose.
  std::string bad_out;
  if (ctx.rank() == 0 && a.has("out")) {
    const std::string out = a.str("out");
    std::error_code ec;
    const bool existed = std::filesystem::exists(out, ec);
    if (out.empty() || std::filesystem::is_directory(out, ec) || !std::ofstream(out, std::ios::app))
      bad_out = "cannot write --out = '" + out + "' (a folder, a missing folder or no name)";
    else if (!existed)
      std::filesystem::remove(out, ec);  // made only to try it
  }
  collective_check(ctx.world(), bad_out.empty(), bad_out);
  const json rows = c.run(ctx, a);
  if (ctx.rank() == 0) {
    json part = {{"case", c.name}, {"rows", rows}};
    print_table(rows, c.columns);  // shown even where the file then fails
    if (a.has("out")) write_json(a.str("out"), part);
  }
  return 0;
}
}  // namespace

std::vector<Case> tessera::bench::all_cases() {
  return {redistribute_case(), halo_case(), conv_kernel_case(), conv_case(),   io_case(),
          train_case(),        fft_case(),  attention_case(),   points_case(), scaling_case()};
}

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
      usage();
      return args.empty() ? 2 : 0;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "merge") return merge(rest);
    if (args[0] == "ranks") return ranks(rest);
    return app::run_reporting_errors("tessera-bench", argc, argv, [&](Context& ctx, int, char**) {
      return run_case(ctx, args[0], rest);
    });
  } catch (const std::exception& e) {
    std::cerr << "tessera-bench: " << e.what() << std::endl;
    return 1;
  }
}
