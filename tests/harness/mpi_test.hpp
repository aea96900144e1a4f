#pragma once
// Collective assertions for MPI tests. Every rank evaluates the condition; the verdict
// is all-reduced, so a condition that fails on one rank fails the test on every rank
// (with the failing ranks named) and no rank runs ahead into a collective alone.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tessera::test {

// The communicator the harness synchronizes on (a duplicate of MPI_COMM_WORLD).
MPI_Comm harness_comm();
int world_rank();
int world_size();
// Ranks of the harness communicator on which `ok` is false; empty when all passed.
std::vector<int> failing_ranks(bool ok);
std::string rank_list(const std::vector<int>& ranks);

}  // namespace tessera::test

#define TESSERA_COLLECTIVE_ASSERT_(macro, expr)                                         \
  do {                                                                                  \
    const bool tessera_ok_ = static_cast<bool>(expr);                                   \
    const auto tessera_bad_ = ::tessera::test::failing_ranks(tessera_ok_);              \
    INFO("`" #expr "` failed on rank(s) " << ::tessera::test::rank_list(tessera_bad_)); \
    macro(tessera_bad_.empty());                                                        \
  } while (0)

// REQUIRE / CHECK that hold only if they hold on every rank.
#define MPI_REQUIRE(expr) TESSERA_COLLECTIVE_ASSERT_(REQUIRE, expr)
#define MPI_CHECK(expr) TESSERA_COLLECTIVE_ASSERT_(CHECK, expr)
