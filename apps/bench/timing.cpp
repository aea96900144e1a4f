#include "apps/bench/timing.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace tessera::bench {

double time_slowest(MPI_Comm comm, const std::function<void()>& fn) {
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  fn();
  double dt = MPI_Wtime() - t0, worst = 0;
  MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
  return worst;
}
Timing summarize(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

std::pair<Timing, Timing> time_interleaved(MPI_Comm comm, int reps, int warmup,
                                           const std::function<void()>& a,
                                           const std::function<void()>& b) {
  const std::vector<Timing> t = time_interleaved(comm, reps, warmup, {a, b});
  return {t[0], t[1]};
}

std::vector<Timing> time_interleaved(MPI_Comm comm, int reps, int warmup,
                                     const std::vector<std::function<void()>>& fns) {
  for (int i = 0; i < warmup; ++i)
    for (const auto& f : fns) f();
  std::vector<std::vector<double>> t(fns.size());
  for (int i = 0; i < reps; ++i)
    for (std::size_t j = 0; j < fns.size(); ++j) t[j].push_back(time_slowest(comm, fns[j]));
  std::vector<Timing> out;
  for (const auto& series : t) out.push_back(summarize(series));
  return out;
}

Timing time_collective(MPI_Comm comm, int reps, int warmup, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(time_slowest(comm, fn));
  return summarize(t);
}

SplitTiming time_collective_split(MPI_Comm comm, int reps, int warmup,
                                  const std::function<void()>& fn,
                                  const std::function<double()>& counter) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<std::pair<double, double>> runs;  // (total, part), each the slowest rank's
  for (int i = 0; i < reps; ++i) {
    const double before = counter();
    const double total = time_slowest(comm, fn);
    double part = counter() - before, worst = 0;
    // The part is at most its own rank's total, so never more than the slowest total.
    MPI_Allreduce(&part, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
    runs.push_back({total, worst});
  }
  std::sort(runs.begin(), runs.end());
  return {{runs[runs.size() / 2].first, runs.front().first}, runs[runs.size() / 2].second};
}

void sleeping_barrier(MPI_Comm comm) {
  MPI_Request req;
  MPI_Ibarrier(comm, &req);
  int done = 0;
  while (true) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

double PairedEfficiency::e_median() const {
  return summarize(e).median_s;
}

PairedEfficiency time_paired(MPI_Comm comm, int pairs, const std::function<void()>& one,
                             const std::function<void()>& par) {
  int rank = 0, n = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  auto time_one = [&] {
    double t = 0;
    sleeping_barrier(comm);
    if (rank == 0) {
      one();
      const double t0 = MPI_Wtime();
      one();
      t = MPI_Wtime() - t0;
    }
    sleeping_barrier(comm);
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, comm);
    return t;
  };
  auto time_par = [&] {
    par();
    return time_slowest(comm, par);
  };
  PairedEfficiency p;
  // The node's cores (one node here), not this rank's binding.
  p.cores = std::min(n, std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  for (int i = 0; i < pairs; ++i) {
    double a = 0, b = 0;
    if (i % 2 == 0) {
      a = time_one();
      b = time_par();
    } else {
      b = time_par();
      a = time_one();
    }
    p.t1_s.push_back(a);
    p.tn_s.push_back(b);
    p.e.push_back(a / (p.cores * b));
  }
  return p;
}

}  // namespace tessera::bench
