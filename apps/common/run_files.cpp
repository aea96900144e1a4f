#include "apps/common/run_files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <utility>
#include <vector>

#include "decomp/error.hpp"
#include "io/output_file.hpp"
#include "runtime/comm/collective_error.hpp"

namespace tessera::app {

void check_writable(MPI_Comm comm, const TrainConfig& cfg) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  collective_run(comm, [&] {
    if (rank != 0) return;
    namespace fs = std::filesystem;
    std::vector<std::pair<std::string, fs::path>> dirs = {
        {"train.checkpoint_dir", fs::path(cfg.train.checkpoint_dir)}};
    if (!cfg.train.metrics_csv.empty()) {
      const fs::path parent = fs::path(cfg.train.metrics_csv).parent_path();
      dirs.push_back({"the folder of train.metrics_csv", parent.empty() ? fs::path(".") : parent});
    }
    for (const auto& [what, dir] : dirs) {
      std::error_code ec;
      TESSERA_CHECK(!(fs::is_symlink(fs::symlink_status(dir, ec)) && !fs::exists(dir, ec)),
                    what << " = '" << dir.string() << "' is a link to a missing folder ('"
                         << fs::read_symlink(dir, ec).string() << "')");
      if (what == "train.checkpoint_dir") fs::create_directories(dir, ec);  // as saving would
      const std::string why = ec ? ec.message() : io::folder_write_problem(dir.string());
      TESSERA_CHECK(why.empty(),
                    what << " = '" << dir.string() << "' does not take files (" << why << ")");
    }
    if (!cfg.train.metrics_csv.empty()) {
      // The checkpoint code writes ckpt_* and .tessera-* there: a metrics file by such a
      // name would be replaced by a checkpoint, or pruned as one.
      const fs::path m(cfg.train.metrics_csv);
      const std::string name = m.filename().string();
      std::error_code ec;
      const fs::path mdir = m.parent_path().empty() ? fs::path(".") : m.parent_path();
      TESSERA_CHECK(!(fs::equivalent(mdir, cfg.train.checkpoint_dir, ec) &&
                      (name.rfind("ckpt_", 0) == 0 || name.rfind(".tessera-", 0) == 0)),
                    "train.metrics_csv = '" << cfg.train.metrics_csv
                                            << "' is named as checkpoints are in "
                                               "train.checkpoint_dir: a checkpoint would "
                                               "replace it, or pruning remove it; choose "
                                               "another name");
    }
  });
}

CheckpointDirLock::CheckpointDirLock(MPI_Comm comm, const std::string& dir) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  collective_run(comm, [&] {
    if (rank != 0) return;
    const std::string path = (std::filesystem::path(dir) / ".tessera-lock").string();
    // O_NOFOLLOW: a link planted there must not have its target rewritten.
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    TESSERA_CHECK(fd_ >= 0, "cannot create the lock file '"
                                << path << "' of train.checkpoint_dir: " << std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char holder[256] = {};
      const ssize_t n = pread(fd_, holder, sizeof holder - 1, 0);
      close(fd_);
      fd_ = -1;
      std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
      if (!who.empty() && who.back() == '\n') who.pop_back();
      TESSERA_CHECK(err != EWOULDBLOCK, "train.checkpoint_dir '"
                                            << dir << "' is in use by another run"
                                            << (who.empty() ? "" : " (" + who + ")")
                                            << ": two runs in one folder would overwrite and "
                                               "prune each other's checkpoints");
      // A file system without locks (an NFS mount without its lock service): go on
      // unguarded, saying so, rather than refuse to train there.
      std::cerr << "warning: cannot lock '" << path << "' (" << std::strerror(err)
                << "): a second run into train.checkpoint_dir would not be refused" << std::endl;
      return;
    }
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const std::string me =
        "process " + std::to_string(getpid()) + " on " + std::string(host) + "\n";
    if (ftruncate(fd_, 0) == 0) (void)!pwrite(fd_, me.data(), me.size(), 0);
  });
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0) close(fd_);  // the lock goes with it; the file stays (removing it would race)
}

}  // namespace tessera::app
