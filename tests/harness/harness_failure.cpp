// Deliberately failing MPI test for harness_failure_is_collective: a check that fails
// only on the last rank must fail the run on every rank, name that rank, and end.
#include "tests/harness/mpi_test.hpp"

TEST_CASE("one rank fails a collective check", "[harness]") {
  const int me = tessera::test::world_rank(), last = tessera::test::world_size() - 1;
  MPI_REQUIRE(me != last);
}

TEST_CASE("later test cases still run in lockstep", "[harness]") {
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_REQUIRE(sum == tessera::test::world_size());
}

TEST_CASE("one rank fails a plain (non-collective) check", "[harness]") {
  // Only the last rank records a failure; the end-of-case sync keeps everyone together.
  CHECK(tessera::test::world_rank() != tessera::test::world_size() - 1);
}
