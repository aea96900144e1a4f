#include "runtime/comm/collective_error.hpp"

#include <cstdint>
#include <exception>
#include <optional>
#include <sstream>
#include <vector>

#include "decomp/hash.hpp"
#include "runtime/comm/bounded_failure.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {

namespace {

// Every rank's text (empty: nothing to say), grouped: ranks with the same text named together.
std::vector<std::pair<std::string, std::vector<int>>> gather_groups(MPI_Comm comm,
                                                                    const std::string& mine) {
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size), displs(size, 0);
  TESSERA_MPI(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) displs[r] = total, total += lens[r];
  std::string all(static_cast<std::size_t>(total), '\0');
  TESSERA_MPI(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                             MPI_CHAR, comm));
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < size; ++r) {
    if (lens[r] == 0) continue;
    std::string m =
        all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lens[r]));
    auto g = groups.begin();
    while (g != groups.end() && g->first != m) ++g;
    if (g == groups.end())
      groups.push_back({std::move(m), {r}});
    else
      g->second.push_back(r);
  }
  return groups;
}

std::string describe(const std::vector<std::pair<std::string, std::vector<int>>>& groups) {
  std::string what;
  for (std::size_t g = 0; g < groups.size() && g < failure::kShownMessages; ++g) {
    const auto& [m, ranks] = groups[g];
    what += (what.empty() ? "" : "; ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") +
            failure::rank_list(ranks) + ": " + m;
  }
  if (groups.size() > failure::kShownMessages)
    what += "; and " + std::to_string(groups.size() - failure::kShownMessages) +
            " other messages, from ranks " + failure::rank_list(failure::ranks_past_shown(groups));
  return what;
}

// The check; with `agreed` (non-null), also that every rank passed the same text.
void check(MPI_Comm comm, bool ok, const std::string& msg, const std::string* call,
           const std::string* what, const std::string* agreed) {
  // A failing rank cannot tell whether the others will reach this check: bounded wait.
  std::optional<failure::Watch> watch;
  if (!ok) watch.emplace(msg.empty() ? "(no message)" : msg);
  // One all-reduce: any failure, and the largest hash and largest complement of the hash
  // (all ranks agree when the largest complement is the complement of the largest).
  const std::uint64_t h = agreed ? fnv1a(agreed->data(), agreed->size()) : 0;
  std::uint64_t local[3] = {ok ? 0u : 1u, h, ~h}, max[3] = {0, 0, 0};
  TESSERA_MPI(MPI_Allreduce(local, max, 3, MPI_UINT64_T, MPI_MAX, comm));
  const bool any_bad = max[0] != 0, differ = max[2] != ~max[1];
  if (!any_bad && !differ) return;
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  if (!any_bad) {  // every rank passed its own check, with different arguments
    auto groups = gather_groups(comm, *agreed);
    // A text of many lines (a model): each group's first line that differs from the first
    // group's, with its line number.
    if (agreed->find('\n') != std::string::npos) {
      const auto lines = [](const std::string& t) {
        std::vector<std::string> v;
        std::string line;
        std::istringstream in(t);
        while (std::getline(in, line)) v.push_back(line);
        return v;
      };
      const std::vector<std::string> first = lines(groups.front().first);
      std::size_t at = first.size();
      for (std::size_t g = 1; g < groups.size(); ++g) {
        const std::vector<std::string> other = lines(groups[g].first);
        std::size_t i = 0;
        while (i < first.size() && i < other.size() && first[i] == other[i]) ++i;
        at = std::min(at, i);
      }
      for (auto& [text, ranks] : groups) {
        const std::vector<std::string> v = lines(text);
        text = "line " + std::to_string(at + 1) + " '" + (at < v.size() ? v[at] : "") + "'";
      }
    }
    throw Error(*call + ": ranks disagree on " + *what + ": " + describe(groups));
  }
  // Everyone learns every failing rank's message.
  const std::string mine = ok ? std::string() : (msg.empty() ? "(no message)" : msg);
  const auto groups = gather_groups(comm, mine);
  watch.reset();
  int failed = 0;
  for (const auto& g : groups) failed += static_cast<int>(g.second.size());
  std::string what_failed = describe(groups);
  if (failed == 0) what_failed = "a rank failed a check without a message";
  // Every rank failed alike (a bad config, a missing file; a one-rank job): the message
  // as it is, as a local error on every rank reads.
  const std::string text = failed == size && groups.size() == 1
                               ? groups.front().first
                               : "check failed on " + std::to_string(failed) + " of " +
                                     std::to_string(size) + " ranks: " + what_failed;
  throw Error(text);
}

}  // namespace

void collective_check(MPI_Comm comm, bool ok, const std::string& msg) {
  check(comm, ok, msg, nullptr, nullptr, nullptr);
}

void collective_check(MPI_Comm comm, bool ok, const std::string& msg, const std::string& call,
                      const std::string& what, const std::string& agreed) {
  check(comm, ok, msg, &call, &what, &agreed);
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

std::string broadcast_string(MPI_Comm comm, std::string s) {
  int len = static_cast<int>(s.size());
  TESSERA_MPI(MPI_Bcast(&len, 1, MPI_INT, 0, comm));
  s.resize(static_cast<std::size_t>(len));
  TESSERA_MPI(MPI_Bcast(s.data(), len, MPI_CHAR, 0, comm));
  return s;
}

}  // namespace tessera
