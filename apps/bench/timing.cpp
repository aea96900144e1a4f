#include "apps/bench/timing.hpp"

#include <algorithm>
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

}  // namespace tessera::bench
