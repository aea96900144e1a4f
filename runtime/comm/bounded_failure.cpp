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

#include "runtime/comm/fault_inject.hpp"
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
  if (const char* v = std::getenv("TESSERA_FAILURE_TIMEOUT"); v && *v) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (!(end && *end == '\0' && s > 0))
      return std::string("TESSERA_FAILURE_TIMEOUT = '") + v +
             "' is not a number of seconds > 0 (inf: never)";
  }
  if (const char* v = std::getenv("TESSERA_END_NOTICE"); v && *v) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (!(end && *end == '\0' && s >= 0))
      return std::string("TESSERA_END_NOTICE = '") + v +
             "' is not a number of seconds >= 0 (0: no notice)";
  }
  return "";
}

double end_notice_s() {
  const char* v = std::getenv("TESSERA_END_NOTICE");
  if (!v || !*v) return 300.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  return end && *end == '\0' && s >= 0 ? s : 300.0;  // else named by timeout_env_problem()
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

void mute_signal_notice() {
  g_announce.store(false, std::memory_order_release);
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

namespace {

constexpr int kTagArrive = 7101;   // a rank's error ("" on success), to rank 0
constexpr int kTagPresent = 7102;  // rank 0 to rank 1: rank 0 has reached the end

// Sleeps a little longer each time: the first millisecond spins, then up to 10 ms per poll
// (a rank waiting at the end costs no core, against MPI's busy wait in a blocking call).
class Backoff {
 public:
  void pause() {
    const auto waited = Clock::now() - start_;
    if (waited < std::chrono::milliseconds(1)) return;
    delay_ = std::min(delay_ * 2, std::chrono::microseconds(10000));
    std::this_thread::sleep_for(delay_);
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  Clock::time_point start_ = Clock::now();
  std::chrono::microseconds delay_{50};
};

void say(const std::string& line) {
  std::fflush(stdout);
  [[maybe_unused]] const ssize_t n = ::write(2, line.data(), line.size());
}

// Polls `req` until it completes; on_wait(seconds waited) between polls.
template <class F>
void wait_polling(MPI_Request* req, F on_wait) {
  Backoff b;
  for (;;) {
    int done = 0;
    TESSERA_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    on_wait(b.seconds());
    b.pause();
  }
}

// Every rank's error on every rank, in rank order (lens, and the texts back to back). Rank 0
// receives each rank's error as it arrives and then broadcasts them all, so a rank that waits
// long at the end can say for whom: rank 0 names the ranks that have not arrived after
// `notice` seconds (0: never), and rank 1 names rank 0 when it has not arrived (a rank that
// waits in a collective call the others did not make, or one still working, never comes).
void exchange_errors(MPI_Comm comm, const std::string& error, double notice, std::vector<int>& lens,
                     std::string& all) {
  int rank = 0, size = 1;
  TESSERA_MPI(MPI_Comm_rank(comm, &rank));
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  lens.assign(static_cast<std::size_t>(size), 0);
  std::vector<std::string> errors(static_cast<std::size_t>(size));
  errors[0] = error;
  auto said = [&](double waited) { return notice > 0 && waited >= notice; };
  if (rank == 0) {
    MPI_Request present = MPI_REQUEST_NULL;
    if (size > 1) TESSERA_MPI(MPI_Isend(nullptr, 0, MPI_CHAR, 1, kTagPresent, comm, &present));
    std::vector<bool> arrived(static_cast<std::size_t>(size), false);
    arrived[0] = true;
    int left = size - 1;
    bool told = false;
    Backoff b;
    while (left > 0) {
      int flag = 0;
      MPI_Status st;
      TESSERA_MPI(MPI_Iprobe(MPI_ANY_SOURCE, kTagArrive, comm, &flag, &st));
      if (flag) {
        int n = 0;
        TESSERA_MPI(MPI_Get_count(&st, MPI_CHAR, &n));
        std::string& e = errors[static_cast<std::size_t>(st.MPI_SOURCE)];
        e.resize(static_cast<std::size_t>(n));
        TESSERA_MPI(
            MPI_Recv(e.data(), n, MPI_CHAR, st.MPI_SOURCE, kTagArrive, comm, MPI_STATUS_IGNORE));
        arrived[static_cast<std::size_t>(st.MPI_SOURCE)] = true;
        --left;
        continue;
      }
      if (!told && said(b.seconds())) {
        std::vector<int> missing;
        for (int r = 0; r < size; ++r)
          if (!arrived[static_cast<std::size_t>(r)]) missing.push_back(r);
        say(program() + ": rank 0 has waited " + std::to_string(static_cast<long>(b.seconds())) +
            " s at the end of the program for " + (missing.size() == 1 ? "rank " : "ranks ") +
            rank_list(missing) + " of " + std::to_string(size) +
            " (still working, or waiting in a collective call the other ranks did not make; "
            "TESSERA_END_NOTICE)\n");
        told = true;
      }
      b.pause();
    }
    TESSERA_MPI(MPI_Wait(&present, MPI_STATUS_IGNORE));
    for (int r = 0; r < size; ++r)
      lens[static_cast<std::size_t>(r)] =
          static_cast<int>(errors[static_cast<std::size_t>(r)].size());
  } else {
    MPI_Request sent = MPI_REQUEST_NULL;
    TESSERA_MPI(MPI_Isend(error.data(), static_cast<int>(error.size()), MPI_CHAR, 0, kTagArrive,
                          comm, &sent));
    bool zero_here = rank != 1, told = false;
    auto note_rank0 = [&](double waited) {
      if (!zero_here) {
        int flag = 0;
        TESSERA_MPI(MPI_Iprobe(0, kTagPresent, comm, &flag, MPI_STATUS_IGNORE));
        if (flag) {
          TESSERA_MPI(MPI_Recv(nullptr, 0, MPI_CHAR, 0, kTagPresent, comm, MPI_STATUS_IGNORE));
          zero_here = true;
        }
      }
      if (!zero_here && !told && said(waited)) {
        say(program() + ": rank 1 has waited " + std::to_string(static_cast<long>(waited)) +
            " s at the end of the program for rank 0 (still working, or waiting in a "
            "collective call the other ranks did not make; TESSERA_END_NOTICE)\n");
        told = true;
      }
    };
    MPI_Request lens_req = MPI_REQUEST_NULL;
    TESSERA_MPI(MPI_Ibcast(lens.data(), size, MPI_INT, 0, comm, &lens_req));
    wait_polling(&lens_req, note_rank0);
    if (!zero_here)  // sent before the broadcast: take it now
      TESSERA_MPI(MPI_Recv(nullptr, 0, MPI_CHAR, 0, kTagPresent, comm, MPI_STATUS_IGNORE));
    TESSERA_MPI(MPI_Wait(&sent, MPI_STATUS_IGNORE));
  }
  if (rank == 0) {
    MPI_Request lens_req = MPI_REQUEST_NULL;
    TESSERA_MPI(MPI_Ibcast(lens.data(), size, MPI_INT, 0, comm, &lens_req));
    wait_polling(&lens_req, [](double) {});
  }
  std::size_t total = 0;
  for (int n : lens) total += static_cast<std::size_t>(n);
  all.clear();
  if (rank == 0)
    for (const std::string& e : errors) all += e;
  all.resize(total);
  if (total == 0) return;
  MPI_Request all_req = MPI_REQUEST_NULL;
  TESSERA_MPI(MPI_Ibcast(all.data(), static_cast<int>(total), MPI_CHAR, 0, comm, &all_req));
  wait_polling(&all_req, [](double) {});
}

// The end of the program on every rank of comm: exchange_errors, a failing rank (error not
// empty) under a Watch, since the others may wait for it elsewhere and never come.
void meet_at_end(MPI_Comm comm, const std::string& error, std::vector<int>& lens,
                 std::string& all) {
  std::optional<Watch> watch;
  if (!error.empty()) watch.emplace(error);
  exchange_errors(comm, error, end_notice_s(), lens, all);
}

}  // namespace

int conclude(MPI_Comm comm, const std::string& error) {
  int rank = 0, size = 1;
  TESSERA_MPI(MPI_Comm_rank(comm, &rank));
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  // Tests: a rank that reaches the end late (a straggler, or one stuck elsewhere).
  if (fault_point("late_end")) std::this_thread::sleep_for(std::chrono::seconds(3));
  std::vector<int> lens, displs(static_cast<std::size_t>(size), 0);
  std::string all;
  meet_at_end(comm, error, lens, all);
  for (int r = 0, total = 0; r < size; ++r)
    displs[static_cast<std::size_t>(r)] = total, total += lens[static_cast<std::size_t>(r)];
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

void end_of_context(MPI_Comm comm, const std::string& error) {
  std::vector<int> lens;
  std::string all;
  meet_at_end(comm, error, lens, all);
}

}  // namespace tessera::failure
