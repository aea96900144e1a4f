// Case "io": sharded collective read of a float32 dataset (--mib=1024, at least 1 GiB by
// default) against plain POSIX pread of the same bytes, each rank its own byte range,
// in the same run with the page cache warm for both. The file is written once (untimed,
// contiguous layout), every read is checked cell by cell (untimed), and the file is
// deleted at the end. Extra rows: a halo read (1-cell ghosts) of the same slabs, and a
// 3-D block decomposition (strided hyperslabs) for comparison.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "apps/bench/cases.hpp"
#include "apps/bench/timing.hpp"
#include "io/pread_fully.hpp"
#include "io/sharded.hpp"
#include "runtime/comm/collective_error.hpp"

namespace tessera::bench {
namespace {

// The value of global cell i: exact in float32 and different from its neighbours.
float cell_value(Index i) {
  return static_cast<float>(i % 1000003);
}

bool check_box(const Tensor& t, const Box& padded, const Box& want,
               const std::vector<Index>& shape) {
  const Box dom = Box::from_shape(shape);
  const float* x = t.data<float>();
  std::vector<Index> p(static_cast<std::size_t>(padded.ndim));
  for (Index i = 0; i < t.numel(); ++i) {
    delinearize(padded, i, p.data());
    const float v = want.contains(p.data()) ? cell_value(linear_index(dom, p.data())) : 0.f;
    if (x[i] != v) return false;
  }
  return true;
}

json run(Context& ctx, const cli::Args& opt) {
  const Index mib = size_option(opt, "mib");
  const int reps = reps_option(opt);
  const Index X = 512, Y = 512, Z = std::max<Index>(1, mib * (Index(1) << 20) / (4 * X * Y));
  const std::vector<Index> shape = {1, 1, Z, Y, X};
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = opt.has("dir") ? opt.str("dir") : tmp && *tmp ? tmp : "/tmp";
  if (dir.empty()) throw Error("option --dir: an empty folder name (it made the file at /)");
  const auto yes = [&](const std::string& name) {  // yes or no, nothing else
    const auto v = opt.choices(name, {"yes", "no"});
    if (v.size() != 1) throw Error("option --" + name + " is yes or no");
    return *v.begin() == "yes";
  };
  const bool also_grid = yes("grid"), keep = yes("keep");
  long pid = static_cast<long>(getpid());
  MPI_Bcast(&pid, 1, MPI_LONG, 0, ctx.world());
  const std::string path = dir + "/tessera-bench-io-" + std::to_string(pid) + ".h5";
  const double bytes = 4.0 * static_cast<double>(Z * Y * X);
  const char* io_env = std::getenv("OMPI_MCA_io");
  const std::string component = io_env && *io_env ? io_env : "default";

  // Slabs along Z over a 1-D mesh: the layout whose POSIX equivalent is one range per rank.
  const Mesh line = Mesh::line(ctx.world());
  const ShardSpec slab(shape, {Replicate(), Replicate(), Shard(0), Replicate(), Replicate()}, line);
  {
    // Written once, untimed.
    const Box own = slab.local_box(line.coords());
    Tensor local = Tensor::empty(own.shape(), DType::f32);
    std::vector<Index> p(5);
    for (Index i = 0; i < local.numel(); ++i) {
      delinearize(own, i, p.data());
      local.data<float>()[i] = cell_value(linear_index(Box::from_shape(shape), p.data()));
    }
    io::File f = io::File::create(path, ctx.world());
    io::WriteOptions wo;
    wo.chunk = {0};  // contiguous
    io::write_sharded(f, "/fields/u", ShardTensor::unchecked(line, slab, local), wo);
  }
  json rows = json::array();
  bool all_ok = true;
  try {
    io::File f = io::File::open(path, ctx.world());
    // The dataset's byte offset in the file, for the POSIX reads of the same bytes.
    h5::Handle d = f.open_dataset("/fields/u", DType::f32);
    const haddr_t offset = H5Dget_offset(d.get());
    collective_check(ctx.world(), offset != HADDR_UNDEF,
                     "no file offset for the contiguous dataset");
    const int fd = ::open(path.c_str(), O_RDONLY);
    collective_check(ctx.world(), fd >= 0, "cannot open " + path + " for pread");

    auto measure = [&](const std::string& layout, const Mesh& mesh, const ShardSpec& spec,
                       Index ghost) {
      const std::vector<Index> w = {0, 0, ghost, ghost, ghost};
      const std::vector<Index> wz = {0, 0, ghost, 0, 0};
      const std::vector<Index>& width = layout == "grid" ? w : wz;
      const HaloTensor h(mesh, spec, width, width, DType::f32);
      io::TransferReport rep;
      const Timing th = time_collective(ctx.world(), reps, 1,
                                        [&] { rep = io::read_halo_into(f, "/fields/u", h); });
      const Box own = spec.local_box(mesh.coords());
      const bool ok = check_box(h.padded(), h.padded_box(),
                                intersect(h.padded_box(), Box::from_shape(shape)), shape);
      // POSIX: this rank's share of the same total bytes as one contiguous range.
      const Index cells = intersect(h.padded_box(), Box::from_shape(shape)).volume();
      Index before = 0;
      MPI_Exscan(&cells, &before, 1, MPI_INT64_T, MPI_SUM, ctx.world());
      if (ctx.rank() == 0) before = 0;
      Index total = 0;
      MPI_Allreduce(&cells, &total, 1, MPI_INT64_T, MPI_SUM, ctx.world());
      const Index file_cells = Z * Y * X;
      std::vector<char> buf(static_cast<std::size_t>(cells) * 4);
      bool pread_ok = true;
      const Timing tp = time_collective(ctx.world(), reps, 1, [&] {
        // Wrap around the file when halos make the total exceed it.
        Index at = before % file_cells, left = cells;
        char* b = buf.data();
        while (left > 0) {
          const Index n = std::min(left, file_cells - at);
          const auto bytes = static_cast<std::size_t>(n) * 4;
          pread_ok = pread_ok &&
                     io::pread_fully(
                         fd, b, bytes,
                         static_cast<std::size_t>(offset + static_cast<haddr_t>(at) * 4)) == bytes;
          b += n * 4, left -= n, at = 0;
        }
      });
      int good = ok && pread_ok ? 1 : 0, all = 0;
      MPI_Allreduce(&good, &all, 1, MPI_INT, MPI_MIN, ctx.world());
      all_ok = all_ok && all;
      (void)own;
      const double moved = 4.0 * static_cast<double>(total);
      rows.push_back({{"ranks", ctx.size()},
                      {"io", component},
                      {"layout", layout},
                      {"ghost", ghost},
                      {"MiB", moved / (1 << 20)},
                      {"t_h5_ms", th.median_s * 1e3},
                      {"t_posix_ms", tp.median_s * 1e3},
                      {"GBps_h5", moved / th.median_s / 1e9},
                      {"GBps_posix", moved / tp.median_s / 1e9},
                      {"ratio", tp.median_s / th.median_s},
                      {"collective", rep.collective},
                      {"correct", all == 1}});
    };
    measure("slab", line, slab, 0);
    measure("slab", line, slab, 1);
    if (also_grid) {
      const Mesh grid = Mesh::for_grid(ctx.world(), {Z, Y, X});
      const ShardSpec g(shape, {Replicate(), Replicate(), Shard(0), Shard(1), Shard(2)}, grid);
      measure("grid", grid, g, 0);
    }
    ::close(fd);
  } catch (...) {
    MPI_Barrier(ctx.world());
    if (ctx.rank() == 0) std::filesystem::remove(path);
    throw;
  }
  MPI_Barrier(ctx.world());
  if (ctx.rank() == 0 && !keep) std::filesystem::remove(path);
  (void)bytes;
  (void)all_ok;
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  bool ok = true;
  for (const auto& r : rows)
    ok = ok && r.at("correct").get<bool>() && r.at("collective").get<bool>();
  g.push_back(goal("every read correct and collective", ok ? 1 : 0, "==", 1));
  for (const auto& r : rows)
    if (r.at("layout") == "slab" && r.at("ghost").get<int>() == 0)
      g.push_back(goal("sharded collective read vs POSIX pread, " +
                           std::to_string(r.at("ranks").get<int>()) + " rank(s), " +
                           std::to_string(static_cast<int>(r.at("MiB").get<double>())) + " MiB",
                       r.at("ratio").get<double>(), ">=", 0.7));
  return g;
}

}  // namespace

Case io_case() {
  return {"io",
          "sharded collective HDF5 read of a float32 dataset (--mib=1024) vs POSIX pread of the "
          "same bytes, warm page cache",
          {{"mib", "N", "dataset size in MiB", "1024"},
           {"reps", "N", "timed repetitions", "5"},
           {"dir", "DIR", "where the file goes (default $TMPDIR, else /tmp)", ""},
           {"grid", "yes|no", "also read through a 3-D rank grid, not only slabs", "yes"},
           {"keep", "yes|no", "keep the file afterwards", "no"}},
          {1, 2, 4},
          {"ranks", "io", "layout", "ghost", "MiB", "t_h5_ms", "t_posix_ms", "GBps_h5",
           "GBps_posix", "ratio", "collective", "correct"},
          run,
          goals};
}

}  // namespace tessera::bench
