#include "runtime/comm/collective_error.hpp"

#include <exception>
#include <optional>
#include <vector>

#include "runtime/comm/bounded_failure.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {

void collective_check(MPI_Comm comm, bool ok, const std::string& msg) {
  // A failing rank cannot tell whether the others will reach this check: bounded wait.
  std::optional<failure::Watch> watch;
  if (!ok) watch.emplace(msg.empty() ? "(no message)" : msg);
  int local_bad = ok ? 0 : 1, any_bad = 0;
  TESSERA_MPI(MPI_Allreduce(&local_bad, &any_bad, 1, MPI_INT, MPI_MAX, comm));
  if (!any_bad) return;
  // Everyone learns every failing rank's message: gather lengths, then the text.
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  const std::string mine = ok ? std::string() : (msg.empty() ? "(no message)" : msg);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size), displs(size, 0);
  TESSERA_MPI(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) displs[r] = total, total += lens[r];
  std::string all(static_cast<std::size_t>(total), '\0');
  TESSERA_MPI(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                             MPI_CHAR, comm));
  watch.reset();
  // Ranks with the same message are named together, so N ranks failing alike give one
  // message, not N.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  int failed = 0;
  for (int r = 0; r < size; ++r) {
    if (lens[r] == 0) continue;
    ++failed;
    std::string m =
        all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lens[r]));
    auto g = groups.begin();
    while (g != groups.end() && g->first != m) ++g;
    if (g == groups.end())
      groups.push_back({std::move(m), {r}});
    else
      g->second.push_back(r);
  }
  std::string what;
  for (const auto& [m, ranks] : groups)
    what += (what.empty() ? "" : "; ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") +
            failure::rank_list(ranks) + ": " + m;
  if (failed == 0) what = "a rank failed a check without a message";
  // Every rank failed alike (a bad config, a missing file; a one-rank job): the message
  // as it is, as a local error on every rank reads.
  const std::string text = failed == size && groups.size() == 1
                               ? groups.front().first
                               : "check failed on " + std::to_string(failed) + " of " +
                                     std::to_string(size) + " ranks: " + what;
  throw Error(text);
}

void collective_run(MPI_Comm comm, const std::function<void()>& fn) {
  std::string msg;
  bool ok = true;
  try {
    fn();
  } catch (const std::exception& e) {
    ok = false;
    msg = e.what();
    if (msg.empty()) msg = "exception without message";
  }
  collective_check(comm, ok, msg);
}

}  // namespace tessera
