#pragma once
// Bounded failure: a failure on some ranks ends the job on every rank within a bounded
// time, with its message printed once, never a hang.
//
// - Where the failure can be made collective (collective_check), every rank learns it
//   and leaves through the same error; conclude() at the end of a program prints it once.
// - Where a failing rank cannot know that the others will join it (they may be waiting
//   inside a library's collective, HDF5 or MPI-IO, or already in their next collective),
//   it arms a Watch first: unless the Watch is disarmed within the deadline, a watchdog
//   thread prints the message once and calls MPI_Abort.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

namespace tessera::failure {

// Seconds a failing rank waits for the others before it ends the job: env
// TESSERA_FAILURE_TIMEOUT (seconds, > 0), else 10.
double deadline_s();
// Why TESSERA_FAILURE_TIMEOUT or TESSERA_END_NOTICE cannot be used, else "" (unset, or a
// number of seconds, > 0 for the timeout, >= 0 for the notice; inf or past 1e8 s: capped at
// 1e8, never in practice); the apps refuse to start with it.
std::string timeout_env_problem();
// Seconds a rank waits at the end (conclude) before it says for whom: env TESSERA_END_NOTICE
// (0: never), else 300.
double end_notice_s();
void set_deadline_s(double seconds);
// The program name that starts every error line ("tessera-train"); default "tessera".
void set_program(const std::string& name);
const std::string& program();

// While alive on a rank that has failed: the job is aborted `deadline_s()` after
// construction (plus 0.25 s x min(world rank, 16), so that of several ranks stuck alike
// the lowest speaks), printing "PROGRAM: error (rank R of N): MESSAGE" and why. Nestable.
class Watch {
 public:
  explicit Watch(const std::string& message);
  // A watch with its own bound (seconds) and second line (why the job ends), for a call
  // that may never return on any rank: a library looping over damaged input.
  Watch(const std::string& message, double seconds, const std::string& ending);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  int id_;
};

// The end of a program on every rank of comm (a communicator kept for this, so that it
// never meets a collective left pending elsewhere): every rank passes its error ("" on
// success) and learns the others'. A failing rank waits under a Watch, so when the other
// ranks never arrive (they wait for it elsewhere) the job ends after the deadline. Ranks that
// succeeded wait without a bound (a straggler may be writing a large output), polling, not
// spinning; after end_notice_s() rank 0 names the ranks that have not arrived, or rank 1
// names rank 0 (a rank stuck in a collective call the others did not make never comes). The
// lowest failing rank prints one line per distinct message: "PROGRAM: error: MESSAGE"
// when every rank failed alike, else "PROGRAM: error (ranks 0, 2 of 3): MESSAGE".
// Returns 0 when no rank failed, else 1 (on every rank).
int conclude(MPI_Comm comm, const std::string& error);

// The end of a program that did not end through conclude: tessera::Context's destructor calls
// it before MPI_Finalize (which would wait for every rank without a word). The same exchange
// on `comm`, printing nothing when every rank arrives. A rank with an `error` (an exception
// leaving the Context's scope, or its constructor's) waits under a Watch naming it, so one
// that failed alone ends the job after the deadline instead of waiting in MPI_Finalize for
// ranks that wait for it in their next exchange; the others ("" for success) wait with
// conclude's notice (they may be ahead of a straggler).
void end_of_context(MPI_Comm comm, const std::string& error);

// While alive: if a Watch ends the job, the file at `path` is removed first (the temporary
// of an output being written: a job ended by a watch leaves no partial file behind); so
// does SIGINT or SIGTERM (Ctrl-C, scancel, a time limit: mpirun forwards them), where no
// other handler was installed. Nestable (up to 16 at once); each rank registers its own.
class RemoveOnAbort {
 public:
  explicit RemoveOnAbort(const std::string& path);
  ~RemoveOnAbort();
  RemoveOnAbort(const RemoveOnAbort&) = delete;
  RemoveOnAbort& operator=(const RemoveOnAbort&) = delete;

 private:
  int slot_ = -1;  // where the path is kept (-1: more than 16 at once, or too long)
};

// From now on SIGINT and SIGTERM remove the registered outputs as above, and where `speak`
// (one rank of the job) say "PROGRAM: stopped by SIGTERM" first, so a job ended by scancel,
// a time limit or Ctrl-C does not end without a word.
void announce_signals(bool speak);
// The job's end is said already (its error line): a SIGTERM from the launcher ending the
// other ranks after this one's exit adds no second line. Outputs are still removed.
void mute_signal_notice();

// "0", "0, 2", "0-7": a sorted rank list, runs shortened.
std::string rank_list(const std::vector<int>& ranks);

// Of many distinct messages (each rank its own figure: 1000 ranks, 1000 lines), error reports
// show the first kShownMessages groups (in order of their lowest rank), then how many more
// there were and from which ranks.
inline constexpr std::size_t kShownMessages = 4;
// The ranks of groups [kShownMessages, end), merged and sorted.
std::vector<int> ranks_past_shown(
    const std::vector<std::pair<std::string, std::vector<int>>>& groups);

}  // namespace tessera::failure
