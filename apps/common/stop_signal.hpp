#pragma once
// A stop asked for by a signal: SLURM's `--signal=USR1@SECONDS` (or `kill -USR1` of mpirun,
// which forwards it) some time before a job's time limit or a preemption. tessera-train ends
// at the next step's end on every rank alike, that step validated and checkpointed, instead of
// losing the steps since the last checkpoint to the SIGTERM and SIGKILL that follow.
#include <mpi.h>

#include <string>

namespace tessera::app {

// The signal named by train.stop_signal ("USR1", "USR2"), 0 for "none".
int stop_signal_number(const std::string& name);

// From now on `sig` (0: nothing) only marks the stop as asked on this rank; its default
// action (ending the process at once) is replaced. Calls in progress are restarted.
void catch_stop_signal(int sig);

// Collective over comm, once per step: whether any rank has received the stop signal (the
// launcher may reach the ranks at different moments; every rank learns the same answer at
// the same step).
bool stop_asked(MPI_Comm comm);

// A run stopped so ends with exit status 0 on every rank, as a finished one: a non-zero
// status from one rank has the launcher (mpirun, srun --kill-on-bad-exit) kill the others
// with SIGTERM as they finalize, and report that signal instead. It says so in its last
// lines; a batch script knows it sent the signal (scripts/slurm/train.sbatch).

}  // namespace tessera::app
