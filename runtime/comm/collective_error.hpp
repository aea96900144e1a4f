#pragma once
// Collective errors: a check that one rank fails while others pass must not leave the
// passing ranks waiting in the next collective. collective_check() is entered by every
// rank of `comm`; if any rank fails, every rank throws the same tessera::Error naming
// the failing ranks and their messages (ranks with the same message named together; when
// every rank failed alike, the message once). A failing rank waits for the others under
// a failure::Watch (runtime/comm/bounded_failure.hpp): if they never come, the job ends.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <functional>
#include <string>

namespace tessera {

// ok: this rank's verdict; msg: why it failed (ignored when ok).
void collective_check(MPI_Comm comm, bool ok, const std::string& msg);

// Runs fn on every rank; an exception on any rank becomes a collective Error on all.
void collective_run(MPI_Comm comm, const std::function<void()>& fn);

}  // namespace tessera
