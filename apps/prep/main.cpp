// tessera-prep: makes, converts, inspects and validates HDF5 datasets, under mpirun.
//   tessera-prep generate darcy|heat|points [options]
//   tessera-prep convert|inspect|validate|stats FILE [options]
// Every subcommand takes --help. Errors print on every rank and exit non-zero.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

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

// After a failure: wait (bounded) for every rank to arrive, so a rank that failed alone
// cannot leave the others in a collective forever; abort the job if they do not come.
void settle_or_abort(MPI_Comm comm) {
  MPI_Request req;
  MPI_Ibarrier(comm, &req);
  const auto t0 = std::chrono::steady_clock::now();
  for (int done = 0; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done && std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)) {
      std::cerr << "tessera-prep: other ranks did not fail alike; aborting the job" << std::endl;
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Context ctx(argc, argv);
  MPI_Comm settle;
  MPI_Comm_dup(ctx.world(), &settle);
  int rc = 0;
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
      if (ctx.rank() == 0) std::cout << overview();
      rc = args.empty() ? 2 : 0;
    } else {
      std::string name = args[0];
      std::size_t used = 1;
      if (name == "generate") {
        if (args.size() < 2 || args[1].rfind("--", 0) == 0) {
          if (args.size() >= 2 && (args[1] == "--help")) {
            if (ctx.rank() == 0) std::cout << overview();
            MPI_Comm_free(&settle);
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
      const cli::Args a(
          std::vector<std::string>(args.begin() + static_cast<long>(used), args.end()),
          cmd->options);
      if (a.help()) {
        if (ctx.rank() == 0)
          std::cout << cli::help_text(cmd->usage, cmd->description, cmd->options);
      } else {
        rc = cmd->run(ctx, a);
      }
    }
  } catch (const std::exception& e) {
    // One write per line, so lines of different ranks do not interleave.
    const std::string line = "tessera-prep: rank " + std::to_string(ctx.rank()) + " of " +
                             std::to_string(ctx.size()) + ": error: " + e.what() + "\n";
    std::fflush(stderr);
    [[maybe_unused]] const ssize_t n = ::write(2, line.data(), line.size());
    rc = 1;
    settle_or_abort(settle);
  }
  MPI_Comm_free(&settle);
  return rc;
}
