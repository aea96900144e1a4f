#pragma once
// Helpers of the I/O tests: a fresh file name per test (under TESSERA_TEST_TMPDIR, never
// the source tree) agreed on by all ranks, and sub-communicators of the first n ranks.
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tessera::test {

inline std::string temp_file(MPI_Comm comm, const std::string& stem) {
  static int counter = 0;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  long pid = static_cast<long>(getpid());
  MPI_Bcast(&pid, 1, MPI_LONG, 0, comm);
  const char* dir = std::getenv("TESSERA_TEST_TMPDIR");
  const std::filesystem::path base =
      dir && *dir ? std::filesystem::path(dir) : std::filesystem::temp_directory_path();
  if (rank == 0) std::filesystem::create_directories(base);
  MPI_Barrier(comm);
  return (base / (stem + "-" + std::to_string(pid) + "-" + std::to_string(counter++) + ".h5"))
      .string();
}

// Whether a job's temporary output for `path` (PATH.tmp.HOST.PID) is there.
inline bool temp_output_left(const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  const std::string prefix = p.filename().string() + ".tmp";
  for (const auto& e : std::filesystem::directory_iterator(
           p.has_parent_path() ? p.parent_path() : std::filesystem::path("."), ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

// The first n ranks of comm (MPI_COMM_NULL on the others); free with MPI_Comm_free.
inline MPI_Comm first_ranks(MPI_Comm comm, int n) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Comm_split(comm, rank < n ? 0 : MPI_UNDEFINED, rank, &out);
  return out;
}

inline void remove_file(MPI_Comm comm, const std::string& path) {
  MPI_Barrier(comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) std::filesystem::remove(path);
}

}  // namespace tessera::test
