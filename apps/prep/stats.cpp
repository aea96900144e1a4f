// tessera-prep stats: normalization statistics computed in parallel, stored as attributes.
#include <algorithm>
#include <sstream>
#include <iostream>

#include "apps/prep/common.hpp"
#include "apps/prep/progress.hpp"

namespace tessera::prep {
namespace {

int run(Context& ctx, const cli::Args& a) {
  if (a.positional().size() != 1) throw Error("stats needs one HDF5 file (see --help)");
  const std::string path = a.positional()[0];
  std::vector<std::string> dsets;
  std::vector<io::schema::ChannelStats> stats;
  {
    // Everything checked and scanned read-only: parallel HDF5 allocates (and fills) the
    // storage of an unallocated dataset opened in a writable file, so a declared-only dataset
    // of terabytes would be written out (it filled a disk) before it could be refused; and
    // the file, edited in place, is open for writing only while the attributes are written
    // (a job killed during the scans of a large file had left it without any of them, and
    // an HDF5 file killed while open for writing may be left damaged).
    const io::File r = io::File::open(path, ctx.world());
    io::schema::require_valid(r);  // statistics of a file that fails the schema mean nothing
    for (const std::string& d : r.datasets())
      if (const std::string why = unscannable(r, d); !why.empty())
        throw Error(why + ": no statistics computed (nothing written)");
    if (a.has("dataset")) {
      // As HDF5 reads a path ("fields/u", "//fields/u/" are /fields/u): the schema's rules,
      // which decide the channel dim, compare whole paths.
      std::string d;
      std::stringstream parts(a.str("dataset"));
      for (std::string part; std::getline(parts, part, '/');)
        if (!part.empty()) d += "/" + part;
      const auto all = r.datasets();
      TESSERA_CHECK(
          std::find(all.begin(), all.end(), d) != all.end(),
          "--dataset " << a.str("dataset") << ": no such dataset in '" << r.path() << "'");
      TESSERA_CHECK(d.rfind(std::string(io::schema::kFields) + "/", 0) == 0 ||
                        d == io::schema::kCoords || d == io::schema::kFeatures,
                    "--dataset " << a.str("dataset") << ": statistics are of /fields/NAME, "
                                 << io::schema::kCoords << " and " << io::schema::kFeatures);
      dsets.push_back(d);
    } else {
      for (const std::string& d : r.datasets())
        if (d.rfind(std::string(io::schema::kFields) + "/", 0) == 0 || d == io::schema::kFeatures ||
            d == io::schema::kCoords)
          dsets.push_back(d);
    }
    if (dsets.empty())
      throw Error("'" + r.path() + "' holds no schema datasets to compute statistics of");
    // Attributes written through an external link would change another file than the one
    // named: refused before any scan.
    for (const std::string& d : dsets)
      if (const std::string to = r.external_link_on(d); !to.empty())
        throw Error(r.where(d) + " is stored in " + to +
                    ": stats writes only into the file it is given; run it on that file "
                    "(nothing written)");
    for (const std::string& d : dsets) {
      Progress progress(ctx.world(), "stats " + d, 0, 0, a.flag("quiet"));
      io::schema::ChannelStats s = io::schema::scan(r, d, io::schema::channel_dim_of(d),
                                                    [&](Index done, Index total, double bytes) {
                                                      progress.update_bytes(done, total, bytes);
                                                    });
      if (!s.first_bad.empty())
        throw Error(r.where(d) + ": non-finite value " + std::to_string(s.first_bad_value) +
                    " at index " + shape_str(s.first_bad) +
                    "; statistics would be meaningless (nothing written)");
      stats.push_back(std::move(s));
    }
  }
  io::File f = io::File::open(path, ctx.world(), io::Mode::ReadWrite);
  for (std::size_t i = 0; i < dsets.size(); ++i) io::schema::write_stats(f, dsets[i], stats[i]);
  f.close();
  if (ctx.rank() == 0)
    for (std::size_t i = 0; i < dsets.size(); ++i) {
      const io::schema::ChannelStats& s = stats[i];
      std::cout << dsets[i] << " (" << s.count << " values per channel)\n";
      for (std::size_t c = 0; c < s.mean.size(); ++c)
        std::cout << "  channel " << c << ": mean " << s.mean[c] << ", std " << s.std[c] << ", min "
                  << s.min[c] << ", max " << s.max[c] << "\n";
    }
  return 0;
}

}  // namespace

Command stats_command() {
  return {"stats",
          "tessera-prep stats F.h5 [--dataset D]",
          "Computes per-channel mean, std, min and max of every field, the point features and\n"
          "the coordinates, reading each dataset once in parallel, and stores them as the\n"
          "attributes mean, std, min, max and stats_count (a description of the data: tessera-\n"
          "train computes its normalization from its own training split). Every dataset is\n"
          "scanned before any attribute is written: an error or a kill leaves the file as it was.",
          {{"dataset", "D", "only this dataset", ""}, {"quiet", "", "no progress output", ""}},
          run};
}

}  // namespace tessera::prep
