#include "apps/common/stop_signal.hpp"

#include <atomic>
#include <csignal>

#include "decomp/error.hpp"

namespace tessera::app {
namespace {

// Bit 1 << sig set in the handler for each signal received, which may run on any thread of the
// process (OpenMP's, MPI's), read on the main thread: a lock-free atomic is safe in both places.
std::atomic<unsigned> g_received{0};
static_assert(std::atomic<unsigned>::is_always_lock_free);
int g_stop_sig = 0;  // the one that stops, once the config has named it

extern "C" void mark_received(int sig) {
  g_received.fetch_or(1u << sig, std::memory_order_relaxed);
}

// The signals held from main's first line until the config names the stop signal, with the
// action each had before.
struct Held {
  int sig;
  bool held = false;
  struct sigaction before {};
};
Held g_held[] = {{SIGUSR1}, {SIGUSR2}};
bool g_settled = false;  // catch_stop_signal() or release_stop_signals() has run

struct sigaction marking() {
  struct sigaction sa {};
  sa.sa_handler = mark_received;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: a read or write (HDF5, MPI's sockets) the signal lands in goes on, not EINTR.
  sa.sa_flags = SA_RESTART;
  return sa;
}

bool is(const struct sigaction& a, void (*handler)(int)) {
  return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == handler;
}

// A held signal gets its action from before the hold back, unless something (MPI's start-up)
// has set another since; received meanwhile, and that action the default, it is taken now,
// as it would have been when it came.
void let_go(Held& h, bool take_received = true) {
  if (!h.held) return;
  h.held = false;
  struct sigaction now {};
  if (sigaction(h.sig, nullptr, &now) != 0 || !is(now, mark_received)) return;
  sigaction(h.sig, &h.before, nullptr);
  if (take_received && (g_received.load(std::memory_order_relaxed) & (1u << h.sig)) &&
      is(h.before, SIG_DFL))
    std::raise(h.sig);
}

}  // namespace

int stop_signal_number(const std::string& name) {
  if (name == "USR1") return SIGUSR1;
  if (name == "USR2") return SIGUSR2;
  if (name == "none") return 0;
  throw Error("train.stop_signal = '" + name + "': expected USR1, USR2 or none");
}

void hold_stop_signals() noexcept {
  const struct sigaction sa = marking();
  for (Held& h : g_held) {
    struct sigaction before {};
    // An ignored signal stays ignored; a failure leaves the signal as it was.
    if (sigaction(h.sig, nullptr, &before) != 0 || is(before, SIG_IGN)) continue;
    h.held = sigaction(h.sig, &sa, &h.before) == 0;
  }
}

void catch_stop_signal(int sig) {
  TESSERA_CHECK(sig == 0 || sig == SIGUSR1 || sig == SIGUSR2,
                "train.stop_signal: signal " << sig << " is not USR1 or USR2");
  g_settled = true;
  g_stop_sig = sig;
  for (Held& h : g_held) {
    if (h.sig != sig) {
      let_go(h);
      continue;
    }
    h.held = false;  // the config's now: received while held, it counts as asked
    const struct sigaction sa = marking();
    if (sigaction(sig, &sa, nullptr) != 0)
      throw Error("cannot install the handler of train.stop_signal (" + std::to_string(sig) + ")");
  }
}

void release_stop_signals(bool take_received) {
  if (g_settled) return;
  g_settled = true;
  for (Held& h : g_held) let_go(h, take_received);
}

bool stop_asked(MPI_Comm comm) {
  int mine = g_stop_sig != 0 && (g_received.load(std::memory_order_relaxed) & (1u << g_stop_sig)),
      any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
  return any != 0;
}

}  // namespace tessera::app
