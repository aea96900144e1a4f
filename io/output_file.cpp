#include "io/output_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::io {

namespace fs = std::filesystem;

std::string folder_write_problem(const std::string& dir) {
  const fs::path probe = fs::path(dir) / (".tessera-write-test." + std::to_string(getpid()));
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  const bool wrote = write(fd, "x", 1) == 1;
  const int err = errno;
  close(fd);
  std::error_code ec;
  fs::remove(probe, ec);
  return wrote ? std::string() : std::strerror(err);
}

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

namespace {

// Temporaries of `path` left by processes of this host that have ended (killed before
// they could remove them: SIGKILL, a node's OOM killer). Another host's, or a live
// process's, are left alone.
void remove_stale_temporaries(const std::string& path, const std::string& host) {
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp." + host + ".";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p.has_parent_path() ? p.parent_path() : ".", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    // This process's own number: an earlier process's (numbers restart with a container).
    if (pid == getpid() || (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH))
      fs::remove(e.path(), ec);
  }
}

}  // namespace

std::string temp_path(const std::string& path, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string tag;
  if (rank == 0) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    remove_stale_temporaries(path, host);
    tag = std::string(host) + "." + std::to_string(getpid());
  }
  int n = static_cast<int>(tag.size());
  TESSERA_MPI(MPI_Bcast(&n, 1, MPI_INT, 0, comm));
  tag.resize(static_cast<std::size_t>(n));
  TESSERA_MPI(MPI_Bcast(tag.data(), n, MPI_CHAR, 0, comm));
  return path + ".tmp." + tag;
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

// Rank 0: PATH locked (flock) against a second job adding to it, or -1 where locks are not
// supported; another job's lock is an error on every rank. After locking, PATH must still
// be the file locked (a job that renamed its copy into place meanwhile replaced it).
int lock_for_adding(const std::string& path, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int fd = -1;
  collective_run(comm, [&] {
    if (rank != 0) return;
    for (int tries = 0; tries < 100; ++tries) {
      fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;  // missing: open_copy says so
      if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        close(fd);
        fd = -1;
        TESSERA_CHECK(err != EWOULDBLOCK, "'" << path
                                              << "' is being added to by another job "
                                                 "(it holds the file's lock): add after it ends");
        return;  // no locks on this file system: unguarded
      }
      struct stat held {
      }, now{};
      if (fstat(fd, &held) == 0 && stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
          held.st_dev == now.st_dev)
        return;
      close(fd);
      fd = -1;
    }
  });
  return fd;
}

// `tmp` as a copy of PATH (rank 0 copies, never over an existing file; every rank learns a
// failure), opened to add to.
File open_copy(const std::string& path, const std::string& tmp, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  collective_run(comm, [&] {
    if (rank != 0) return;
    std::error_code ec;
    TESSERA_CHECK(fs::is_regular_file(path, ec),
                  "'" << path << "' to add to does not exist (or is not a file)");
    fs::copy_file(path, tmp, fs::copy_options::none, ec);
    TESSERA_CHECK(!ec, "cannot copy '" << path << "' to '" << tmp << "': " << ec.message());
  });
  return File::open(tmp, comm, Mode::ReadWrite);
}

// Why `path` cannot name an output file, or "": replacing a folder would fail only at the
// final rename (after all the work), and a link or a special file would be replaced by a
// regular file.
std::string output_path_problem(const std::string& path) {
  if (path.empty()) return "the output path is empty";
  const std::string out = "output '" + path + "' ";
  // The folder must take a new file (the temporary): said here, not as an MPI-IO code.
  if (fs::path(path).filename().empty()) return out + "ends in '/': name a file";
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  std::error_code dir_ec;
  if (fs::exists(dir, dir_ec) && !fs::is_directory(dir, dir_ec))  // access() would say EACCES
    return out + "cannot be written: its folder '" + dir + "' is not a folder";
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return out + "cannot be written: its folder '" + dir + "': " + std::strerror(errno);
  if (const std::string why = folder_write_problem(dir); !why.empty())
    return out + "cannot be written: its folder '" + dir + "' does not take files (" + why + ")";
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return "";
  switch (st.type()) {
    case fs::file_type::regular:
      return "";
    case fs::file_type::directory:
      return out + "is a directory (name a file in it)";
    case fs::file_type::symlink:
      return out + "is a symbolic link (to '" + fs::read_symlink(path, ec).string() +
             "'): writing would replace the link; name the file itself";
    default:
      return out + "is not a regular file (a FIFO, socket or device): refusing to replace it";
  }
}

const std::string& writable_file_path(const std::string& path, MPI_Comm comm) {
  check_output_path(comm, path);
  return path;
}

}  // namespace

void check_output_path(MPI_Comm comm, const std::string& path) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string why = rank == 0 ? output_path_problem(path) : std::string();
  collective_check(comm, why.empty(), why);
}

NewFile::NewFile(const std::string& path, MPI_Comm comm, Start start)
    : path_(writable_file_path(path, comm)),
      comm_(comm),
      tmp_(temp_path(path, comm)),
      path_lock_(start == Start::CopyOfPath ? lock_for_adding(path, comm) : -1),
      remove_on_abort_(tmp_),
      f_(start == Start::CopyOfPath ? open_copy(path, tmp_, comm)
                                    : File::open(tmp_, comm, Mode::CreateNew)) {}

NewFile::~NewFile() {
  if (!committed_) {
    { const File closing = std::move(f_); }  // collective, or under a watch while an error leaves
    int rank = 0;
    MPI_Comm_rank(comm_, &rank);
    std::error_code ec;
    if (rank == 0) fs::remove(tmp_, ec);
  }
  if (path_lock_ >= 0) close(path_lock_);  // after the rename (commit) or the removal
}

void NewFile::commit() {
  f_.close();
  rename_into_place(comm_, tmp_, path_);
  committed_ = true;
}

}  // namespace tessera::io
