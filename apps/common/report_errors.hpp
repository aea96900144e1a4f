#pragma once
// The main() of tessera-train, tessera-infer and tessera-prep: run the program; an
// exception on any rank ends the job on every rank, bounded in time, with its message
// printed once (runtime/comm/bounded_failure.hpp) and exit status 1.
#include <mpi.h>

#include <exception>
#include <new>
#include <string>

#include "decomp/error.hpp"
#include "runtime/comm/bounded_failure.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "runtime/tensor/context.hpp"

namespace tessera::app {

// run(ctx, argc, argv) on every rank, then failure::conclude over a communicator of its own.
template <class Run>
int run_reporting_errors(const char* program, int argc, char** argv, Run run) {
  failure::set_program(program);
  Context ctx(argc, argv);
  failure::announce_signals(ctx.rank() == 0);
  MPI_Comm end;  // conclude's own: a collective left pending on world cannot meet it
  MPI_Comm_dup(ctx.world(), &end);
  int rc = 0;
  std::string error;
  try {
    // Every rank reads the same environment: a bad value stops them all alike.
    if (const std::string why = failure::timeout_env_problem(); !why.empty()) throw Error(why);
    if (const std::string why = count_limit_problem(ctx.world()); !why.empty()) throw Error(why);
    rc = run(ctx, argc, argv);
  } catch (const std::bad_alloc&) {
    // Memory outside the tracked tensors (a library's, a container's): say what it was.
    error = "out of memory (std::bad_alloc): the problem is too large for this rank";
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "an exception without a message";
  }
  const int agreed = failure::conclude(end, error);
  // Said once (the error line): the launcher's SIGTERM to ranks still ending adds nothing.
  if (agreed != 0) failure::mute_signal_notice();
  MPI_Comm_free(&end);
  return agreed != 0 ? agreed : rc;
}

}  // namespace tessera::app
