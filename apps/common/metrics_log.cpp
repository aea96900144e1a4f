#include "apps/common/metrics_log.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "decomp/error.hpp"
#include "runtime/comm/collective_error.hpp"

namespace tessera::app {

namespace {

std::string quoted(const std::string& path) {
  return "train.metrics_csv = '" + path + "'";
}

std::string why(int err) {
  return std::strerror(err);
}

// The whole content of fd from offset 0.
std::string read_all(int fd, const std::string& path) {
  std::string text;
  char buf[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    TESSERA_CHECK(n >= 0, "cannot read " << quoted(path) << ": " << why(errno));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
  return text;
}

// The byte offset after the header and the rows of steps <= step (none for step -1): rows a
// failed run wrote after its last checkpoint would appear twice, and a torn last row (no
// newline) goes too.
// `last`: the step of the last row kept (-1: none).
std::size_t kept_bytes(const std::string& text, std::int64_t step, std::int64_t& last) {
  last = -1;
  std::size_t at = text.find('\n');
  if (at == std::string::npos) return 0;
  ++at;  // past the header
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    if (end == std::string::npos) break;
    const std::string first = text.substr(at, text.find(',', at) - at);
    char* stop = nullptr;
    const long long s = std::strtoll(first.c_str(), &stop, 10);
    if (first.empty() || *stop != '\0' || s > step) break;
    last = s;
    at = end + 1;
  }
  return at;
}

std::int64_t rows_in(const std::string& text) {
  std::int64_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines > 0 ? lines - 1 : 0;
}

}  // namespace

const char* MetricsLog::header() {
  return "step,epoch,lr,loss,val_loss,val_rel_l2,grad_norm,samples_per_s,ms_step,ms_compute,"
         "ms_halo,ms_allreduce,ms_alltoall,peak_mib_per_rank";
}

MetricsLog::MetricsLog(MPI_Comm comm, const std::string& path, bool resume,
                       std::int64_t keep_through)
    : comm_(comm), path_(path) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  collective_run(comm, [&] {
    if (rank == 0 && !path_.empty()) open_on_root(resume, keep_through);
  });
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) close(fd_);  // and its lock
}

void MetricsLog::open_on_root(bool resume, std::int64_t keep_through) {
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TESSERA_CHECK(fd_ >= 0, "cannot write " << quoted(path_) << ": " << why(errno));
  struct stat st {};
  TESSERA_CHECK(fstat(fd_, &st) == 0, "cannot stat " << quoted(path_) << ": " << why(errno));
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    // Open for reading too, a FIFO never reports a vanished reader: once its buffer is full,
    // the run would wait in write() for good.
    close(fd_);
    fd_ = -1;
    throw Error(quoted(path_) +
                " is a FIFO or socket: a reader that stops would stall the run; "
                "write a file (and follow it with tail -f)");
  }
  if (!S_ISREG(st.st_mode)) {  // /dev/null, /dev/full: written, never read, cut or locked
    write_all(std::string(header()) + "\n");
    return;
  }
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      close(fd_);
      fd_ = -1;
      throw Error(quoted(path_) +
                  " is being written by another run (it holds the file's lock): choose another "
                  "train.metrics_csv");
    }
    // A file system without locks: go on unguarded, saying so.
    std::cerr << "warning: cannot lock " << quoted(path_) << " (" << why(err)
              << "): a second run writing it would not be refused" << std::endl;
  }
  const std::string text = read_all(fd_, path_);
  std::size_t keep = 0;
  if (!text.empty()) {
    const std::string first = text.substr(0, text.find('\n'));
    const bool ours = first == header();
    // Resumed from no checkpoint (none there: a new folder, or a mistyped one), the run
    // starts at step 0: another run's rows would be cut.
    if (!resume || !ours || (keep_through < 0 && rows_in(text) > 0)) {
      const std::string rows = std::to_string(rows_in(text)) + " rows";
      const std::string what =
          !ours ? "is not a tessera-train metrics file (its first line: '" + first.substr(0, 60) +
                      (first.size() > 60 ? "...'" : "'") + ")"
          : resume ? "holds " + rows +
                         ", but no checkpoint was resumed (the run would start over at step 0; "
                         "is train.checkpoint_dir that run's?)"
                   : "already holds the metrics of another run (" + rows + ")";
      close(fd_);
      fd_ = -1;
      throw Error(quoted(path_) + " " + what + ": refusing to overwrite it" +
                  (ours && !resume ? " (pass --resume to continue that run, " : " (") +
                  "choose another file, or remove it)");
    }
    std::int64_t last = -1;
    keep = kept_bytes(text, keep_through, last);
    // Rows up to the resumed step that are not there cannot be made again: said, once.
    if (last < keep_through)
      std::cout << "warning: " << quoted(path_)
                << (last < 0 ? std::string(" holds no row")
                             : " ends at step " + std::to_string(last))
                << ", the run resumes after step " << keep_through << ": the rows of steps "
                << last + 1 << " to " << keep_through
                << " are not in it (the file was cut, a crash tore them, or those steps' "
                   "updates were skipped)"
                << std::endl;
  }
  TESSERA_CHECK(ftruncate(fd_, static_cast<off_t>(keep)) == 0,
                "cannot cut " << quoted(path_) << ": " << why(errno));
  TESSERA_CHECK(lseek(fd_, 0, SEEK_END) >= 0,
                "cannot seek in " << quoted(path_) << ": " << why(errno));
  if (keep == 0) write_all(std::string(header()) + "\n");
}

void MetricsLog::write_all(const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    TESSERA_CHECK(n > 0, "cannot write " << quoted(path_) << ": "
                                         << (n < 0 ? why(errno) : std::string("nothing written"))
                                         << " (the metrics of this step are lost; the run stops)");
    done += static_cast<std::size_t>(n);
  }
}

void MetricsLog::append(const std::string& row) {
  if (path_.empty()) return;  // the same on every rank
  collective_run(comm_, [&] {
    if (fd_ >= 0) write_all(row);
  });
}

}  // namespace tessera::app
