#pragma once
// tessera-train's per-step metrics CSV (train.metrics_csv), written by rank 0. It never
// destroys what is there: a new run refuses a file that holds anything (another run's
// metrics, or any other file), a resumed run cuts only a tessera-train metrics file (its
// header) back to the step it continues from, and two runs never write one file at once
// (rank 0 holds its lock). A failed write (a full disk) is an error, not a lost row.
#include <mpi.h>

#include <cstdint>
#include <string>

namespace tessera::app {

class MetricsLog {
 public:
  static const char* header();  // the CSV's first line, without the newline

  // Collective over comm: opens `path` on rank 0 ("" or another rank: an inactive log).
  // A new run (resume false) takes only an empty or missing file; a resumed one keeps the
  // rows of steps <= keep_through (-1: none, the run starts over) of its own file.
  MetricsLog(MPI_Comm comm, const std::string& path, bool resume, std::int64_t keep_through);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Collective over comm (where a path was given): rank 0 appends `row` (ending in '\n');
  // a failure throws on every rank, naming the file and the cause.
  void append(const std::string& row);

 private:
  void open_on_root(bool resume, std::int64_t keep_through);
  void write_all(const std::string& text);

  MPI_Comm comm_;
  std::string path_;
  int fd_ = -1;
};

}  // namespace tessera::app
