#pragma once
// A stop asked for by a signal: SLURM's `--signal=USR1@SECONDS` (or `kill -USR1` of mpirun,
// which forwards it) some time before a job's time limit or a preemption. tessera-train ends
// at the next step's end on every rank alike, that step validated and checkpointed, instead of
// losing the steps since the last checkpoint to the SIGTERM and SIGKILL that follow.
#include <mpi.h>

#include <exception>
#include <string>

namespace tessera::app {

// The signal named by train.stop_signal ("USR1", "USR2"), 0 for "none".
int stop_signal_number(const std::string& name);

// First thing in main, before MPI starts and the config is read: SIGUSR1 and SIGUSR2 (those
// not ignored) only marked as received, so a warning that comes that early is not the end of
// the process. Never throws: a signal it cannot hold stays as it was.
void hold_stop_signals() noexcept;
// From now on `sig` (0: nothing) only marks the stop as asked on this rank; its default
// action (ending the process at once) is replaced. Calls in progress are restarted. The other
// held signal gets its action from before the hold back (unless MPI's start-up set another),
// and, received while held with the default action, takes it now (as it would have when it
// came); `sig` received while held counts as asked.
void catch_stop_signal(int sig);
// For the paths that end before catch_stop_signal() (help, a printed config, a dry run, an
// error): the held signals get their actions back as catch_stop_signal(0) would give them,
// one received meanwhile taken only if `take_received` (not while an error is on its way to
// being reported: the signal's default action would end the process before its message).
// Once either has run, nothing.
void release_stop_signals(bool take_received = true);
// Calls release_stop_signals() as it goes out of scope, taking no received signal while an
// exception is in flight.
struct ReleaseHeldStopSignals {
  ReleaseHeldStopSignals() = default;
  ReleaseHeldStopSignals(const ReleaseHeldStopSignals&) = delete;
  ReleaseHeldStopSignals& operator=(const ReleaseHeldStopSignals&) = delete;
  ~ReleaseHeldStopSignals() { release_stop_signals(std::uncaught_exceptions() == 0); }
};

// Collective over comm, once per step: whether any rank has received the stop signal (the
// launcher may reach the ranks at different moments; every rank learns the same answer at
// the same step).
bool stop_asked(MPI_Comm comm);

// A run stopped so ends with exit status 0 on every rank, as a finished one: a non-zero
// status from one rank has the launcher (mpirun, srun --kill-on-bad-exit) kill the others
// with SIGTERM as they finalize, and report that signal instead. It says so in its last
// lines; a batch script knows it sent the signal (scripts/slurm/train.sbatch).

}  // namespace tessera::app
