#include "apps/common/run_files.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "decomp/error.hpp"
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
      if (what == "train.checkpoint_dir") fs::create_directories(dir, ec);  // as saving would
      const fs::path probe = dir / ".tessera-write-test";
      std::ofstream f(probe);
      TESSERA_CHECK(f && (f << "x") && f.flush(),
                    what << " = '" << dir.string() << "' does not take files"
                         << (ec ? " (" + ec.message() + ")" : std::string()));
      f.close();
      fs::remove(probe, ec);
    }
  });
}

void truncate_metrics(const std::string& path, std::int64_t step) {
  std::ifstream in(path);
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  TESSERA_CHECK(in && out, "cannot rewrite train.metrics_csv = " << path);
  std::string line;
  for (bool header = true; std::getline(in, line); header = false) {
    if (!header) {
      const std::string first = line.substr(0, line.find(','));
      char* end = nullptr;
      const long long s = std::strtoll(first.c_str(), &end, 10);
      if (first.empty() || *end != '\0' || s > step) continue;
    }
    out << line << '\n';
  }
  out.close();
  TESSERA_CHECK(out, "cannot rewrite train.metrics_csv = " << path);
  std::filesystem::rename(tmp, path);
}

}  // namespace tessera::app
