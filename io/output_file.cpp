#include "io/output_file.hpp"

#include <filesystem>
#include <system_error>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::io {

namespace fs = std::filesystem;

void refuse_alias(MPI_Comm comm, const std::string& what_out, const std::string& output,
                  const std::vector<std::pair<std::string, std::string>>& inputs) {
  std::string bad;
  for (const auto& [what, path] : inputs) {
    std::error_code ec;
    if (!path.empty() && fs::equivalent(output, path, ec) && !ec) {
      bad = what_out + " '" + output + "' is the same file as " + what + " '" + path +
            "': refusing to overwrite it (choose another " + what_out + ")";
      break;
    }
  }
  collective_check(comm, bad.empty(), bad);
}

std::string temp_path(const std::string& path) {
  return path + ".tmp";
}

void rename_into_place(MPI_Comm comm, const std::string& tmp, const std::string& path) {
  TESSERA_MPI(MPI_Barrier(comm));  // every rank has closed it
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  collective_run(comm, [&] {
    if (rank != 0) return;
    std::error_code ec;
    fs::rename(tmp, path, ec);
    TESSERA_CHECK(!ec, "cannot rename '" << tmp << "' to '" << path << "': " << ec.message());
  });
}

namespace {

// PATH.tmp as a copy of PATH (rank 0 copies; every rank learns a failure), opened to add to.
File open_copy(const std::string& path, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  collective_run(comm, [&] {
    if (rank == 0) fs::copy_file(path, temp_path(path), fs::copy_options::overwrite_existing);
  });
  return File::open(temp_path(path), comm, Mode::ReadWrite);
}

// Collective: `path` may name a file to write (a folder there would fail only at the final
// rename, after all the work); returns it.
const std::string& writable_file_path(const std::string& path, MPI_Comm comm) {
  std::error_code ec;
  collective_check(comm, !fs::is_directory(path, ec),
                   "output '" + path + "' is a directory (name a file in it)");
  return path;
}

}  // namespace

NewFile::NewFile(const std::string& path, MPI_Comm comm, Start start)
    : path_(writable_file_path(path, comm)),
      comm_(comm),
      remove_on_abort_(temp_path(path)),
      f_(start == Start::CopyOfPath ? open_copy(path, comm) : File::create(temp_path(path), comm)) {
}

NewFile::~NewFile() {
  if (committed_) return;
  { const File closing = std::move(f_); }  // collective, or under a watch while an error leaves
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  std::error_code ec;
  if (rank == 0) fs::remove(temp_path(path_), ec);
}

void NewFile::commit() {
  f_.close();
  rename_into_place(comm_, temp_path(path_), path_);
  committed_ = true;
}

}  // namespace tessera::io
