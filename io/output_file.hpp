#pragma once
// Output files never destroy what the user has: an output is written under a temporary
// name of its own job (PATH.tmp.HOST.PID, created exclusively: never an existing file or
// link) and renamed to PATH only once it is complete and closed on every rank, so a
// failure leaves no partial file under PATH and the previous file there intact, and two
// jobs writing one PATH each rename a whole file of their own (the last one stays); an
// output that is the same file as one of the program's inputs (same inode, under any
// name), a folder, a link or a special file (a FIFO, a device) is refused before anything
// is written.
#include "io/floor.hpp"
#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "io/file.hpp"
#include "runtime/comm/bounded_failure.hpp"

namespace tessera::io {

// Collective: throws on every rank when `output` names the same file as one of `inputs`
// ({what, path}, e.g. {"--input", "a.h5"}); `what_out` names the output ("--output").
void refuse_alias(MPI_Comm comm, const std::string& what_out, const std::string& output,
                  const std::vector<std::pair<std::string, std::string>>& inputs);

// Collective: throws on every rank when `path` cannot name an output file (empty, a folder,
// a link, a FIFO or device), so a program can refuse it before its work; NewFile checks it
// too.
void check_output_path(MPI_Comm comm, const std::string& path);

// Why folder `dir` does not take a new file, with the system's reason, else "": a probe of
// this process's own is created exclusively (never a link followed), written and removed,
// since write permission alone passes folders that refuse files (a read-only mount, /sys).
std::string folder_write_problem(const std::string& dir);

// Collective: "PATH.tmp.HOST.PID" (rank 0's host and process): where this job writes an
// output until it is complete. Rank 0 first removes PATH's temporaries of ended processes
// of its host (a job killed by SIGKILL cannot remove its own).
std::string temp_path(const std::string& path, MPI_Comm comm);

// A new HDF5 output: created as its temporary (empty, or a copy of PATH to add to, PATH
// locked meanwhile); commit() closes it and renames it to PATH.
// Destroyed without commit() (an error), it removes the temporary; so does a watch that
// ends the job meanwhile (runtime/comm/bounded_failure.hpp).
class NewFile {
 public:
  enum class Start { Empty, CopyOfPath };  // a new file, or a copy of PATH to add to
  NewFile(const std::string& path, MPI_Comm comm, Start start = Start::Empty);  // collective
  ~NewFile();
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;

  File& file() { return f_; }
  const std::string& path() const { return path_; }
  const std::string& temp() const { return tmp_; }
  void commit();  // collective

 private:
  std::string path_;
  MPI_Comm comm_;
  std::string tmp_;
  // Adding to PATH (CopyOfPath): rank 0 holds PATH's lock from the copy to the rename, so a
  // second job adding to it at once is refused instead of having its addition replaced.
  int path_lock_ = -1;
  failure::RemoveOnAbort remove_on_abort_;  // before f_: also while it is being created
  File f_;
  bool committed_ = false;
};

// Collective over comm, after every rank has closed `tmp`: rank 0 renames it to `path`;
// a failure is reported on every rank.
void rename_into_place(MPI_Comm comm, const std::string& tmp, const std::string& path);

}  // namespace tessera::io
