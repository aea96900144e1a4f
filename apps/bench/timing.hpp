#pragma once
// Timing of collective operations: every repetition starts at a barrier and counts
// the slowest rank; the median over repetitions resists the drift of shared machines.
#include <mpi.h>

#include <functional>
#include <utility>
#include <vector>

namespace tessera::bench {

struct Timing {
  double median_s = 0, min_s = 0;
};

// One run of fn from a barrier: the slowest rank's time.
double time_slowest(MPI_Comm comm, const std::function<void()>& fn);
// The median and minimum of some times.
Timing summarize(std::vector<double> times);

// Runs fn `warmup` times untimed, then `reps` times timed.
Timing time_collective(MPI_Comm comm, int reps, int warmup, const std::function<void()>& fn);

// A time and the part of it a counter saw (communication waits), from one repetition: the
// median one. Averaging the counter over all repetitions (warm-up included) against a median
// total mixes two statistics and can make the rest negative.
struct SplitTiming {
  Timing total;
  double part_s = 0;  // the counter's growth in the median repetition, slowest rank's
};
// time_collective, reading counter() (cumulative seconds) around each timed repetition.
SplitTiming time_collective_split(MPI_Comm comm, int reps, int warmup,
                                  const std::function<void()>& fn,
                                  const std::function<double()>& counter);

// Times a and b alternately, rep by rep, so a measurement and its baseline see the same
// load on a shared machine (a ratio of two back-to-back series drifts with it).
std::pair<Timing, Timing> time_interleaved(MPI_Comm comm, int reps, int warmup,
                                           const std::function<void()>& a,
                                           const std::function<void()>& b);
// The same for any number of functions, timed in turn within each rep.
std::vector<Timing> time_interleaved(MPI_Comm comm, int reps, int warmup,
                                     const std::vector<std::function<void()>>& fns);

// A barrier whose waiting ranks sleep instead of polling, so that a one-rank run timed
// meanwhile has the machine's other cores to itself.
void sleeping_barrier(MPI_Comm comm);

// Plain efficiency E = T(1 rank) / (cores x T(N ranks)) measured in pairs, so both sides see
// the same load on a shared machine (two launches minutes apart drift by up to 2x here):
// rank 0 alone runs `one` while the others sleep at a barrier, then every rank runs `par`
// (the order alternates per pair), each timed after an untimed run of the same side (a run
// right after the other side's was 10-40% slower: idle cores, cold caches). `one` is
// called on rank 0 only. cores: min(N, the node's cores).
struct PairedEfficiency {
  std::vector<double> t1_s, tn_s, e;  // per pair
  int cores = 1;
  double e_median() const;
};
PairedEfficiency time_paired(MPI_Comm comm, int pairs, const std::function<void()>& one,
                             const std::function<void()>& par);

}  // namespace tessera::bench
