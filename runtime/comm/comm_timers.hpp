#pragma once
// Process-wide accumulators of the time spent in communication, so a training loop can
// split a step into compute, halo exchange and all-reduce without the layers knowing
// about it. Halo: HaloExchange's begin/finish (forward and adjoint). All-to-all: the
// transposes of the distributed FFT (runtime/spectral). All-reduce: the
// statistics and parameter-gradient sums of the layers (ops_support, window_layout);
// callers add their own (the bucketed gradient sync) with ScopedCommTimer.
#include "runtime/floor.hpp"
namespace tessera {

struct CommTimes {
  double halo_s = 0;
  double allreduce_s = 0;
  double alltoall_s = 0;  // the distributed FFT's transposes
};

CommTimes& comm_times();  // this process's accumulators (reset by assigning {})

// Adds the lifetime of the object to one accumulator.
class ScopedCommTimer {
 public:
  explicit ScopedCommTimer(double& slot);
  ~ScopedCommTimer();
  ScopedCommTimer(const ScopedCommTimer&) = delete;
  ScopedCommTimer& operator=(const ScopedCommTimer&) = delete;

 private:
  double& slot_;
  double t0_;
};

}  // namespace tessera
