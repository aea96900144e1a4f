#include <algorithm>
#include <sstream>

#include "runtime/comm/bounded_failure.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "tests/harness/mpi_test.hpp"

using namespace tessera;

TEST_CASE("A check failing on one rank throws on every rank with its message", "[errors]") {
  const int P = test::world_size(), me = test::world_rank();
  const int bad = P - 1;
  std::string msg;
  try {
    collective_check(MPI_COMM_WORLD, me != bad, "input shape (3, 4) is not (3, 5)");
  } catch (const Error& e) {
    msg = e.what();
  }
  MPI_REQUIRE(!msg.empty());
  // On one rank the message as it is; with more, the failing rank is named.
  const std::string who = P == 1 ? "" : "rank " + std::to_string(bad) + ": ";
  MPI_REQUIRE(msg.find(who + "input shape (3, 4) is not (3, 5)") != std::string::npos);
  MPI_REQUIRE(P == 1 ? msg == "input shape (3, 4) is not (3, 5)"
                     : msg.find("1 of " + std::to_string(P) + " ranks") != std::string::npos);
  // All passing: nothing thrown anywhere.
  bool threw = false;
  try {
    collective_check(MPI_COMM_WORLD, true, "unused");
  } catch (const Error&) {
    threw = true;
  }
  MPI_REQUIRE(!threw);
}

TEST_CASE("Several failing ranks are all named", "[errors]") {
  const int me = test::world_rank();
  std::string msg;
  try {
    collective_check(MPI_COMM_WORLD, me % 2 == 1, "even rank " + std::to_string(me));
  } catch (const Error& e) {
    msg = e.what();
  }
  bool ok = true;
  const bool alone = test::world_size() == 1;
  for (int r = 0; r < test::world_size(); r += 2)
    ok = ok && msg.find((alone ? "" : "rank " + std::to_string(r) + ": ") + "even rank " +
                        std::to_string(r)) != std::string::npos;
  MPI_REQUIRE(ok);
}

TEST_CASE("collective_run turns one rank's exception into an error everywhere", "[errors]") {
  const int me = test::world_rank();
  std::string msg;
  try {
    collective_run(MPI_COMM_WORLD, [&] {
      if (me == 0) throw std::runtime_error("file not found: data.h5");
    });
  } catch (const Error& e) {
    msg = e.what();
  }
  MPI_REQUIRE(msg.find(test::world_size() == 1
                           ? "file not found: data.h5"
                           : "rank 0: file not found: data.h5") != std::string::npos);
  // And the job goes on: a collective after the failure completes on all ranks.
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_REQUIRE(sum == test::world_size());
}

TEST_CASE("Ranks failing with one message are named together, once", "[errors]") {
  const int P = test::world_size(), me = test::world_rank();
  // Even ranks fail alike: "ranks 0, 2" (or "ranks 0-2, ..." runs) and the text once.
  std::string msg;
  try {
    collective_check(MPI_COMM_WORLD, me % 2 == 1, "disk full");
  } catch (const Error& e) {
    msg = e.what();
  }
  std::vector<int> even;
  for (int r = 0; r < P; r += 2) even.push_back(r);
  const std::string want = P == 1   ? "disk full"
                           : P == 2 ? "check failed on 1 of 2 ranks: rank 0: disk full"
                                    : "ranks " + failure::rank_list(even) + ": disk full";
  MPI_REQUIRE(msg.find(want) != std::string::npos);
  MPI_REQUIRE(msg.find("disk full") == msg.rfind("disk full"));
  // Every rank alike: the message once, without a rank list.
  msg.clear();
  try {
    collective_check(MPI_COMM_WORLD, false, "unknown key 'optim.lrr'");
  } catch (const Error& e) {
    msg = e.what();
  }
  MPI_REQUIRE(msg == "unknown key 'optim.lrr'");
}

TEST_CASE("rank_list shortens runs", "[errors]") {
  MPI_REQUIRE(failure::rank_list({0}) == "0");
  MPI_REQUIRE(failure::rank_list({0, 2}) == "0, 2");
  MPI_REQUIRE(failure::rank_list({0, 1}) == "0, 1");
  MPI_REQUIRE(failure::rank_list({0, 1, 2, 3, 5, 7, 8, 9}) == "0-3, 5, 7-9");
}

TEST_CASE("Many distinct messages: the first four shown, the rest counted with their ranks",
          "[errors]") {
  // Every rank its own figure (a memory limit's "in use"): at 1000 ranks the error was 1000
  // messages long, and conclude printed 1000 lines.
  const int P = test::world_size(), me = test::world_rank();
  const auto in_use = [](int r) {
    std::ostringstream os;
    os << "in use " << 100 + r << " MiB";
    return os.str();
  };
  std::string msg;
  try {
    collective_check(MPI_COMM_WORLD, false, in_use(me));
  } catch (const Error& e) {
    msg = e.what();
  }
  const int shown = std::min(P, 4);
  bool ok = true;
  for (int r = 0; r < P; ++r) ok = ok && (msg.find(in_use(r)) != std::string::npos) == (r < shown);
  MPI_CHECK(ok);
  if (P > 4) {
    std::ostringstream rest;
    rest << "; and " << P - 4 << " other messages, from ranks 4";
    if (P > 5) rest << '-' << P - 1;
    MPI_CHECK(msg.find(rest.str()) != std::string::npos);
  } else
    MPI_CHECK(msg.find("other messages") == std::string::npos);
}
