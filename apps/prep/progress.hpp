#pragma once
// Progress of long work, printed by rank 0 on stderr: items done of total, MB/s and
// the time left, at most once a second (and at the end).
#include <mpi.h>

#include <chrono>
#include <string>

#include "decomp/box.hpp"

namespace tessera::prep {

class Progress {
 public:
  Progress(MPI_Comm comm, std::string what, Index total, double bytes_per_item, bool quiet = false);
  void update(Index done);  // call on every rank or on rank 0 only; prints on rank 0
  void update_bytes(Index done, Index total, double bytes);

 private:
  std::string what_;
  Index total_;
  double bytes_per_item_;
  bool print_;
  std::chrono::steady_clock::time_point t0_, last_;
};

}  // namespace tessera::prep
