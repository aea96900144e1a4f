#include "runtime/comm/bounded_failure.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/comm/mpi_error.hpp"

namespace tessera::failure {
namespace {

using Clock = std::chrono::steady_clock;

// The outputs to remove when the job ends abnormally (RemoveOnAbort): fixed storage, read
// by the watchdog and by a signal handler alike (no allocation or lock there); a flag is set
// after its path is written and cleared before the slot is reused.
constexpr int kSignalSlots = 16;
constexpr std::size_t kSignalPathMax = 4096;
struct SignalSlot {
  std::atomic<bool> used{false};
  char path[kSignalPathMax];
};
SignalSlot g_signal_slots[kSignalSlots];

// What a rank that speaks for the job says when SIGINT or SIGTERM ends it (written by the
// signal handler: fixed storage, lengths known).
struct SignalLine {
  char text[256];
  std::size_t len = 0;
};
SignalLine g_signal_lines[2];  // SIGINT, SIGTERM
std::atomic<bool> g_announce{false};

// Async-signal-safe: unlink only (an output gone already is fine).
void remove_registered_outputs() {
  for (SignalSlot& s : g_signal_slots)
    if (s.used.load(std::memory_order_acquire)) ::unlink(s.path);
}

// Seconds; a number > 0 ("inf" or anything past 1e8 s, three years: never in practice,
// capped so that now + deadline stays inside the clock's range).
double env_deadline() {
  const char* v = std::getenv("TESSERA_FAILURE_TIMEOUT");
  if (!v || !*v) return 10.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (!end || *end != '\0' || !(s > 0)) return 10.0;  // named by timeout_env_problem()
  return std::min(s, 1e8);
}

struct State {
  std::mutex m;
  std::condition_variable cv;
  std::map<int, std::pair<Clock::time_point, std::string>> armed;  // id -> (deadline, line)
  int next_id = 0;
  double deadline = env_deadline();
  std::string program = "tessera";
  std::thread thread;
  bool stop = false;

  ~State() {
    {
      std::lock_guard<std::mutex> l(m);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }

  // The watchdog: sleeps until the earliest armed deadline; a Watch still armed then
  // means the other ranks never came: one line on stderr and the job ends.
  void run() {
    std::unique_lock<std::mutex> l(m);
    while (!stop) {
      if (armed.empty()) {
        cv.wait(l);
        continue;
      }
      auto first = armed.begin();
      for (auto it = armed.begin(); it != armed.end(); ++it)
        if (it->second.first < first->second.first) first = it;
      // A copy: wait_until reads its deadline again after waking, when ~Watch may have
      // erased the node (the mutex is released while waiting).
      const Clock::time_point until = first->second.first;
      if (Clock::now() < until) {
        cv.wait_until(l, until);
        continue;
      }
      const std::string line = first->second.second;
      [[maybe_unused]] const ssize_t n = ::write(2, line.data(), line.size());
      remove_registered_outputs();
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);  // MPI_Abort does not return; if it did, the process still ends
    }
  }
};

State& state() {
  static State s;
  return s;
}

int world_rank(int* size) {
  int init = 0, fin = 0, r = 0;
  *size = 1;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) {
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, size);
  }
  return r;
}

}  // namespace

std::string timeout_env_problem() {
  const char* v = std::getenv("TESSERA_FAILURE_TIMEOUT");
  if (!v || !*v) return "";
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end && *end == '\0' && s > 0) return "";
  return std::string("TESSERA_FAILURE_TIMEOUT = '") + v +
         "' is not a number of seconds > 0 (inf: never)";
}

double deadline_s() {
  std::lock_guard<std::mutex> l(state().m);
  return state().deadline;
}

void set_deadline_s(double seconds) {
  std::lock_guard<std::mutex> l(state().m);
  state().deadline = seconds > 0 ? std::min(seconds, 1e8) : env_deadline();
}

void set_program(const std::string& name) {
  std::lock_guard<std::mutex> l(state().m);
  state().program = name;
}

const std::string& program() {
  return state().program;
}

namespace {

extern "C" void remove_outputs_and_reraise(int sig) {
  if (g_announce.load(std::memory_order_acquire)) {
    const SignalLine& l = g_signal_lines[sig == SIGINT ? 0 : 1];
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, l.text, l.len);
  }
  remove_registered_outputs();
  ::raise(sig);  // SA_RESETHAND: the default action now ends the process
}

// Once: SIGINT and SIGTERM remove the registered outputs, unless another handler is set.
void install_signal_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = remove_outputs_and_reraise;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    for (int sig : {SIGINT, SIGTERM}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
        ::sigaction(sig, &sa, nullptr);
    }
  });
}

}  // namespace

void announce_signals(bool speak) {
  if (speak) {
    const std::string& name = state().program;
    const char* sigs[2] = {"SIGINT", "SIGTERM"};
    for (int k = 0; k < 2; ++k) {
      const std::string line = name + ": stopped by " + sigs[k] +
                               " (scancel, a time limit, Ctrl-C, or the launcher ending the job "
                               "after another rank's end)\n";
      SignalLine& l = g_signal_lines[k];
      l.len = std::min(line.size(), sizeof(l.text));
      std::memcpy(l.text, line.data(), l.len);
    }
    g_announce.store(true, std::memory_order_release);
  }
  install_signal_cleanup();
}

RemoveOnAbort::RemoveOnAbort(const std::string& path) {
  install_signal_cleanup();
  std::lock_guard<std::mutex> l(state().m);  // one registration at a time
  for (int i = 0; i < kSignalSlots && path.size() < kSignalPathMax; ++i)
    if (!g_signal_slots[i].used.load(std::memory_order_acquire)) {
      std::memcpy(g_signal_slots[i].path, path.c_str(), path.size() + 1);
      g_signal_slots[i].used.store(true, std::memory_order_release);
      slot_ = i;
      break;
    }
}

RemoveOnAbort::~RemoveOnAbort() {
  if (slot_ >= 0) g_signal_slots[slot_].used.store(false, std::memory_order_release);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

Watch::Watch(const std::string& message) : Watch(message, -1, "") {}

Watch::Watch(const std::string& message, double seconds, const std::string& ending) {
  State& s = state();
  int size = 1;
  const int rank = world_rank(&size);
  std::lock_guard<std::mutex> l(s.m);
  const double bound = seconds > 0 ? std::min(seconds, 1e8) : s.deadline;
  std::ostringstream line;
  line << s.program << ": error (rank " << rank << " of " << size << "): " << message << "\n"
       << s.program << ": ";
  if (ending.empty())
    line << "the other ranks did not join within " << bound
         << " s (TESSERA_FAILURE_TIMEOUT): ending the job\n";
  else
    line << ending << ": ending the job\n";
  id_ = s.next_id++;
  // Ranks that fail alike and never meet each have a watch: the lowest fires first, and
  // its MPI_Abort ends the others before theirs (0.25 s later per rank, at most 4 s).
  const double stagger = 0.25 * std::min(rank, 16);
  const auto when = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(bound + stagger));
  s.armed[id_] = {when, line.str()};
  if (!s.thread.joinable()) s.thread = std::thread([&s] { s.run(); });
  s.cv.notify_all();
}

Watch::~Watch() {
  State& s = state();
  std::lock_guard<std::mutex> l(s.m);
  s.armed.erase(id_);
  s.cv.notify_all();
}

std::vector<int> ranks_past_shown(
    const std::vector<std::pair<std::string, std::vector<int>>>& groups) {
  std::vector<int> rest;
  for (std::size_t g = kShownMessages; g < groups.size(); ++g)
    rest.insert(rest.end(), groups[g].second.begin(), groups[g].second.end());
  std::sort(rest.begin(), rest.end());
  return rest;
}

int conclude(MPI_Comm comm, const std::string& error) {
  const bool failed = !error.empty();
  int rank = 0, size = 1;
  TESSERA_MPI(MPI_Comm_rank(comm, &rank));
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  std::vector<int> lens(static_cast<std::size_t>(size)), displs(lens.size(), 0);
  std::string all;
  {
    std::optional<Watch> watch;
    if (failed) watch.emplace(error);
    int len = static_cast<int>(error.size());
    TESSERA_MPI(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
    int total = 0;
    for (int r = 0; r < size; ++r)
      displs[static_cast<std::size_t>(r)] = total, total += lens[static_cast<std::size_t>(r)];
    all.resize(static_cast<std::size_t>(total));
    TESSERA_MPI(MPI_Allgatherv(error.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                               MPI_CHAR, comm));
  }
  // Distinct messages in order of their lowest rank, each with its ranks.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < size; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (lens[i] == 0) continue;
    const std::string msg =
        all.substr(static_cast<std::size_t>(displs[i]), static_cast<std::size_t>(lens[i]));
    auto g = groups.begin();
    while (g != groups.end() && g->first != msg) ++g;
    if (g == groups.end())
      groups.push_back({msg, {r}});
    else
      g->second.push_back(r);
  }
  if (groups.empty()) return 0;
  if (rank == groups.front().second.front()) {  // the lowest failing rank speaks
    std::string out;
    for (std::size_t g = 0; g < groups.size() && g < kShownMessages; ++g) {
      const auto& [msg, ranks] = groups[g];
      out += program() + ": error";
      if (static_cast<int>(ranks.size()) < size)
        out += std::string(ranks.size() == 1 ? " (rank " : " (ranks ") + rank_list(ranks) + " of " +
               std::to_string(size) + ")";
      out += ": " + msg + "\n";
    }
    if (groups.size() > kShownMessages)
      out += program() + ": and " + std::to_string(groups.size() - kShownMessages) +
             " other messages, from ranks " + rank_list(ranks_past_shown(groups)) + "\n";
    std::fflush(stdout);
    [[maybe_unused]] const ssize_t n = ::write(2, out.data(), out.size());
  }
  return 1;
}

}  // namespace tessera::failure
