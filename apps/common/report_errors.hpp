#pragma once
// The main() of tessera-train and tessera-infer: run the program, and turn an exception into
// an error line on stderr and exit status 1.
#include <cstdio>
#include <exception>
#include <string>

#include "runtime/tensor/context.hpp"

namespace tessera::app {

// run(ctx, argc, argv), or 1 after "PROGRAM: error (rank R): WHAT" on stderr.
template <class Run>
int run_reporting_errors(const char* program, int argc, char** argv, Run run) {
  Context ctx(argc, argv);
  try {
    return run(ctx, argc, argv);
  } catch (const std::exception& e) {
    // One write per rank, so the lines of different ranks do not interleave.
    const std::string line = std::string(program) + ": error (rank " + std::to_string(ctx.rank()) +
                             "): " + e.what() + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    return 1;
  }
}

}  // namespace tessera::app
