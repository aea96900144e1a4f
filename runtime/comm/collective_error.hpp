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

// The same, and the arguments of a collective call that every rank must pass alike (a
// shape, a spec, a root, a dataset name; `agreed` describes them as text): ranks that pass
// different ones would otherwise hang in, or garble, the transfer that follows. When they
// differ, every rank throws "<call>: ranks disagree on <what>: rank 0: X; ranks 1-2: Y".
// In the same single all-reduce as the check (a hash of the text), so no extra latency.
void collective_check(MPI_Comm comm, bool ok, const std::string& msg, const std::string& call,
                      const std::string& what, const std::string& agreed);

// Runs fn on every rank; an exception on any rank becomes a collective Error on all.
void collective_run(MPI_Comm comm, const std::function<void()>& fn);

// Collective: rank 0's `s` on every rank (what rank 0 alone found: a file's state, a listing).
std::string broadcast_string(MPI_Comm comm, std::string s);

}  // namespace tessera
