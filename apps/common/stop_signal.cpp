#include "apps/common/stop_signal.hpp"

#include <atomic>
#include <csignal>

#include "decomp/error.hpp"

namespace tessera::app {
namespace {

// Set in the handler, which may run on any thread of the process (OpenMP's, MPI's), read on
// the main thread: a lock-free atomic is safe in both places.
std::atomic<int> g_stop_asked{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void mark_stop_asked(int) {
  g_stop_asked.store(1, std::memory_order_relaxed);
}

}  // namespace

int stop_signal_number(const std::string& name) {
  if (name == "USR1") return SIGUSR1;
  if (name == "USR2") return SIGUSR2;
  if (name == "none") return 0;
  throw Error("train.stop_signal = '" + name + "': expected USR1, USR2 or none");
}

void catch_stop_signal(int sig) {
  if (sig == 0) return;
  struct sigaction sa {};
  sa.sa_handler = mark_stop_asked;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: a read or write (HDF5, MPI's sockets) the signal lands in goes on, not EINTR.
  sa.sa_flags = SA_RESTART;
  if (sigaction(sig, &sa, nullptr) != 0)
    throw Error("cannot install the handler of train.stop_signal (" + std::to_string(sig) + ")");
}

bool stop_asked(MPI_Comm comm) {
  int mine = g_stop_asked.load(std::memory_order_relaxed), any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
  return any != 0;
}

}  // namespace tessera::app
