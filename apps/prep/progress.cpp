#include "apps/prep/progress.hpp"

#include <cstdio>

namespace tessera::prep {

Progress::Progress(MPI_Comm comm, std::string what, Index total, double bytes_per_item, bool quiet)
    : what_(std::move(what)), total_(total), bytes_per_item_(bytes_per_item) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  print_ = rank == 0 && !quiet;
  t0_ = last_ = std::chrono::steady_clock::now();
}

void Progress::update(Index done) {
  update_bytes(done, total_, static_cast<double>(done) * bytes_per_item_);
}

void Progress::update_bytes(Index done, Index total, double bytes) {
  if (!print_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && std::chrono::duration<double>(now - last_).count() < 1.0) return;
  last_ = now;
  const double t = std::chrono::duration<double>(now - t0_).count();
  const double left =
      done > 0 ? t * static_cast<double>(total - done) / static_cast<double>(done) : 0;
  std::fprintf(stderr, "[%s] %lld/%lld, %.1f MB/s, %.1f s elapsed, %.1f s left\n", what_.c_str(),
               static_cast<long long>(done), static_cast<long long>(total),
               t > 0 ? bytes / t / 1e6 : 0.0, t, left);
}

}  // namespace tessera::prep
