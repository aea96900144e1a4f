// tessera-prep: makes, converts, inspects and validates HDF5 datasets, under mpirun.
//   tessera-prep generate darcy|heat|points [options]
//   tessera-prep convert|inspect|validate|stats FILE [options]
// Every subcommand takes --help. An error prints once and exits non-zero on every rank.
#include <iostream>

#include "apps/common/report_errors.hpp"
#include "apps/prep/common.hpp"

using namespace tessera;
using namespace tessera::prep;

namespace {

std::vector<Command> commands() {
  return {generate_darcy_command(), generate_heat_command(), generate_points_command(),
          convert_command(),        inspect_command(),       validate_command(),
          stats_command()};
}

std::string overview() {
  std::string s =
      "usage: tessera-prep COMMAND [options]   (under mpirun for parallel work)\n\ncommands:\n";
  for (const Command& c : commands()) s += "  " + c.usage + "\n";
  return s + "\n`tessera-prep COMMAND --help` describes each.\n";
}

int run(Context& ctx, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    if (ctx.rank() == 0) std::cout << overview();
    return args.empty() ? 2 : 0;
  }
  std::string name = args[0];
  std::size_t used = 1;
  if (name == "generate") {
    if (args.size() < 2 || args[1].rfind("--", 0) == 0) {
      if (args.size() >= 2 && args[1] == "--help") {
        if (ctx.rank() == 0) std::cout << overview();
        return 0;
      }
      throw Error("generate needs a kind: darcy, heat or points");
    }
    name += " " + args[1];
    used = 2;
  }
  const Command* cmd = nullptr;
  static const auto all = commands();
  for (const Command& c : all)
    if (c.name == name) cmd = &c;
  if (!cmd) throw Error("unknown command '" + name + "' (tessera-prep --help lists them)");
  const std::vector<std::string> rest(args.begin() + static_cast<long>(used), args.end());
  // Unknown options, missing values and an option given twice are refused here.
  const cli::Args a(rest, cmd->options);
  if (a.help()) {
    if (ctx.rank() == 0) std::cout << cli::help_text(cmd->usage, cmd->description, cmd->options);
    return 0;
  }
  return cmd->run(ctx, a);
}

}  // namespace

// An error on any rank ends the job on every rank with one message (bounded in time).
int main(int argc, char** argv) {
  return app::run_reporting_errors("tessera-prep", argc, argv, run);
}
