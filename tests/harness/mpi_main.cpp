// Catch2 main for MPI tests: MPI init through tessera::Context, the report on rank 0,
// other ranks' output only where they failed, a collective exit code, and a watchdog
// at every test case end so a rank that diverged aborts the job instead of hanging it.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include "runtime/tensor/context.hpp"
#include "tests/harness/mpi_test.hpp"

namespace tessera::test {
namespace {
MPI_Comm g_comm = MPI_COMM_NULL;
bool g_failed = false;

double sync_timeout_s() {
  const char* v = std::getenv("TESSERA_TEST_SYNC_TIMEOUT");
  return v ? std::atof(v) : 90.0;
}

// Non-blocking all-reduce with a deadline: a rank stuck elsewhere cannot hang us.
int allreduce_max_or_abort(int v, const std::string& where) {
  int out = 0;
  MPI_Request req;
  MPI_Iallreduce(&v, &out, 1, MPI_INT, MPI_MAX, g_comm, &req);
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0;
  while (!done) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
        sync_timeout_s()) {
      std::cerr << "[rank " << world_rank() << "] " << where
                << ": other ranks did not arrive within " << sync_timeout_s()
                << " s (a rank failed or diverged); aborting the job" << std::endl;
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return out;
}

struct MpiSyncListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    const bool bad = stats.totals.assertions.failed > 0;
    g_failed = g_failed || bad;
    allreduce_max_or_abort(bad ? 1 : 0, "end of test case '" + stats.testInfo.name + "'");
  }
};
CATCH_REGISTER_LISTENER(MpiSyncListener)
}  // namespace

MPI_Comm harness_comm() {
  return g_comm;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::vector<int> failing_ranks(bool ok) {
  const int n = world_size();
  int mine = ok ? 0 : 1;
  std::vector<int> all(n);
  MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, g_comm);
  std::vector<int> bad;
  for (int r = 0; r < n; ++r)
    if (all[r]) bad.push_back(r);
  return bad;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
  return ranks.empty() ? "none" : os.str();
}

}  // namespace tessera::test

int main(int argc, char** argv) {
  using namespace tessera::test;
  int rc = 0;
  {
    tessera::Context ctx(argc, argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
    const int rank = ctx.rank(), size = ctx.size();
    // Ranks other than 0 write into a buffer, shown only if that rank failed.
    std::ostringstream captured;
    std::streambuf* old_out = std::cout.rdbuf();
    std::streambuf* old_err = std::cerr.rdbuf();
    if (rank != 0) {
      std::cout.rdbuf(captured.rdbuf());
      std::cerr.rdbuf(captured.rdbuf());
    }
    Catch::Session session;
    session.configData().useColour = Catch::UseColour::No;  // output goes through mpirun
    int failures = session.applyCommandLine(argc, argv);
    if (failures == 0) failures = session.run();
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
    const int bad = (failures != 0 || g_failed) ? 1 : 0;

    // Rank 0 prints each failed rank's captured output, in rank order.
    std::vector<int> flags(size);
    MPI_Gather(&bad, 1, MPI_INT, flags.data(), 1, MPI_INT, 0, g_comm);
    for (int r = 1; r < size; ++r) {
      int f = 0;
      if (rank == 0) f = flags[r];
      MPI_Bcast(&f, 1, MPI_INT, 0, g_comm);
      if (!f) continue;
      if (rank == r) {
        const std::string s = captured.str();
        const int n = static_cast<int>(s.size());
        MPI_Send(&n, 1, MPI_INT, 0, 0, g_comm);
        MPI_Send(s.data(), n, MPI_CHAR, 0, 1, g_comm);
      } else if (rank == 0) {
        int n = 0;
        MPI_Recv(&n, 1, MPI_INT, r, 0, g_comm, MPI_STATUS_IGNORE);
        std::string s(static_cast<std::size_t>(n), '\0');
        MPI_Recv(s.data(), n, MPI_CHAR, r, 1, g_comm, MPI_STATUS_IGNORE);
        std::cout << "---- output of failed rank " << r << " ----\n" << s << std::flush;
      }
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, g_comm);
    if (rank == 0)
      std::cout << "MPI test run on " << size << " rank(s): " << (any ? "FAILED" : "passed")
                << std::endl;
    rc = any ? 1 : 0;
    MPI_Comm_free(&g_comm);
  }
  return rc;
}
