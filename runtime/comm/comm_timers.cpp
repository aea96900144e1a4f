#include "runtime/comm/comm_timers.hpp"

#include <mpi.h>

namespace tessera {

CommTimes& comm_times() {
  static CommTimes t;
  return t;
}

ScopedCommTimer::ScopedCommTimer(double& slot) : slot_(slot), t0_(MPI_Wtime()) {}
ScopedCommTimer::~ScopedCommTimer() {
  slot_ += MPI_Wtime() - t0_;
}

}  // namespace tessera
