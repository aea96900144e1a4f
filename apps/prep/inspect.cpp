// tessera-prep inspect: the schema, shapes, chunking, attributes and statistics.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "apps/prep/common.hpp"
#include "apps/prep/progress.hpp"

namespace tessera::prep {
namespace {

std::string attr_text(const io::File& f, const std::string& obj, const std::string& name) {
  std::ostringstream os;
  const bool str = f.attr_is_string(obj, name);
  const std::vector<std::string> s = str ? f.attr_strings(obj, name) : std::vector<std::string>{};
  const std::vector<double> v = str ? std::vector<double>{} : f.attr_doubles(obj, name);
  const std::size_t n = str ? s.size() : v.size();
  if (n != 1) os << "[";
  for (std::size_t i = 0; i < n && i < 8; ++i) {
    if (i) os << ", ";
    if (str)
      os << (n == 1 ? s[i] : "'" + s[i] + "'");
    else
      os << std::setprecision(6) << v[i];
  }
  if (n > 8) os << ", ... (" << n << " entries)";
  if (n != 1) os << "]";
  return os.str();
}

int run(Context& ctx, const cli::Args& a) {
  if (a.positional().size() != 1) throw Error("inspect needs one HDF5 file (see --help)");
  const io::File f = io::File::open(a.positional()[0], ctx.world());
  const bool root = ctx.rank() == 0;
  std::ostringstream os;
  os << f.path() << "\n";
  for (const std::string& n : f.attr_names("/"))
    os << "  @" << n << " = " << attr_text(f, "/", n) << "\n";
  if (!f.has_attr("/", io::schema::kVersionAttr))
    os << "  (no " << io::schema::kVersionAttr << ": not a Tessera schema file)\n";
  for (const std::string& d : f.datasets()) {
    const io::DatasetInfo in = f.info(d);
    os << d << "  " << shape_str(in.shape) << " " << in.type_name << ", "
       << (in.chunk.empty() ? "contiguous" : "chunks " + shape_str(in.chunk));
    for (const std::string& flt : in.filters) os << ", filter " << flt;
    os << "\n";
    for (const std::string& n : f.attr_names(d))
      os << "  @" << n << " = " << attr_text(f, d, n) << "\n";
    if (a.flag("no-stats")) continue;
    // Statistics are of float values per channel: say why a dataset has none.
    const int cdim = io::schema::channel_dim_of(d);
    if (in.dtype != DType::f32 && in.dtype != DType::f64) {
      os << "  no statistics: element type " << in.type_name << " (float32 or float64 only)\n";
    } else if (cdim >= static_cast<int>(in.shape.size()) || in.shape.size() < 2) {
      os << "  no statistics: a " << in.shape.size() << "-d dataset has no channel dim " << cdim
         << " (samples of (N, C, ...) fields or (N, P, C) points)\n";
    } else {
      const std::string why = unscannable(f, d);
      if (!why.empty()) {
        os << "  no statistics: " << why << "\n";
      } else {
        Progress progress(ctx.world(), "inspect " + d, in.shape[0], 0, a.flag("quiet"));
        const io::schema::ChannelStats s =
            io::schema::scan(f, d, cdim, [&](Index done, Index total, double bytes) {
              progress.update_bytes(done, total, bytes);
            });
        Index per_channel = in.shape[static_cast<std::size_t>(cdim)] > 0 ? 1 : 0;
        for (std::size_t k = 0; k < in.shape.size(); ++k)
          if (static_cast<int>(k) != cdim) per_channel *= in.shape[k];
        os << "  statistics over the " << (s.first_bad.empty() ? "" : "finite ") << "values of "
           << per_channel << " per channel (computed now):\n";
        for (std::size_t c = 0; c < s.mean.size(); ++c) {
          os << "    channel " << c << ": ";
          if (s.finite[c] == 0) {
            os << "no finite value\n";
            continue;
          }
          if (s.finite[c] < per_channel) os << s.finite[c] << " finite, ";
          os << "mean " << s.mean[c] << ", std " << s.std[c] << ", min " << s.min[c] << ", max "
             << s.max[c] << "\n";
        }
        if (!s.first_bad.empty())
          os << "    first non-finite value " << s.first_bad_value << " at "
             << shape_str(s.first_bad) << "\n";
      }
    }
  }
  if (root) std::cout << os.str() << std::flush;
  return 0;
}

}  // namespace

Command inspect_command() {
  return {"inspect",
          "tessera-prep inspect F.h5",
          "Prints the file's schema attributes, and for each dataset its shape, element type,\n"
          "chunking, filters, attributes and per-channel statistics (computed in parallel).",
          {{"no-stats", "", "skip the statistics (no data read)", ""},
           {"quiet", "", "no progress output", ""}},
          run};
}

}  // namespace tessera::prep
