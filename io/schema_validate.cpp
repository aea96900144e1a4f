// schema::validate: every rule of the schema (io/schema.hpp), each violation naming the
// dataset and the attribute or value at fault, in the order the rules are listed there.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "decomp/error.hpp"
#include "io/h5_types.hpp"
#include "io/pieces.hpp"
#include "io/schema.hpp"
#include "io/sharded.hpp"
#include "io/transfer.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::io::schema {
namespace {

using Problems = std::vector<std::string>;
using h5::check;
using h5::Handle;

const std::set<std::string>& known_attrs() {
  static const std::set<std::string> k = {"variables", "spacing", "extent",      "origin", "mean",
                                          "std",       "min",     "stats_count", "max"};
  return k;
}

// An attribute of `want` entries of the right kind; false (with a problem) if not.
bool attr_ok(const File& f, const std::string& d, const std::string& name, std::size_t want,
             bool required, bool strings, Problems& problems) {
  if (!f.has_attr(d, name)) {
    if (required) problems.push_back(f.where(d) + ": missing attribute '" + name + "'");
    return false;
  }
  if (f.attr_is_string(d, name) != strings) {
    problems.push_back(f.where(d) + ": attribute '" + name + "' must be " +
                       (strings ? "strings" : "numbers"));
    return false;
  }
  const std::size_t n = strings ? f.attr_strings(d, name).size() : f.attr_doubles(d, name).size();
  if (n != want) {
    problems.push_back(f.where(d) + ": attribute '" + name + "' has " + std::to_string(n) +
                       " entries, expected " + std::to_string(want));
    return false;
  }
  return true;
}

// A number as short as it reads back exactly: 5 for a count of 5, not 5.000000.
std::string shortest(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Numbers that must be finite (and, with positive, > 0).
void check_numbers(const File& f, const std::string& d, const std::string& name, bool positive,
                   Problems& problems) {
  const std::vector<double> v = f.attr_doubles(d, name);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]) || (positive && !(v[i] > 0))) {
      problems.push_back(f.where(d) + ": attribute '" + name + "' entry " + std::to_string(i) +
                         " is " + shortest(v[i]) + ", must be finite" +
                         (positive ? " and > 0" : ""));
      return;
    }
}

void check_variables(const File& f, const std::string& d, std::size_t C, Problems& problems) {
  if (!attr_ok(f, d, "variables", C, true, true, problems)) return;
  const std::vector<std::string> v = f.attr_strings(d, "variables");
  std::set<std::string> seen;
  for (const std::string& s : v) {
    if (s.empty()) {
      problems.push_back(f.where(d) + ": attribute 'variables' has an empty name");
      return;
    }
    if (!seen.insert(s).second) {
      problems.push_back(f.where(d) + ": attribute 'variables' names '" + s + "' twice");
      return;
    }
  }
}

// spacing, extent (required, > 0), origin (optional, finite); the grid's nodes fit in
// the extent: (n - 1) spacing <= extent along every dim.
void check_grid(const File& f, const std::string& d, const std::vector<Index>& shape,
                Problems& problems) {
  const std::size_t nd = shape.size() - 2;
  const bool sp = attr_ok(f, d, "spacing", nd, true, false, problems);
  const bool ex = attr_ok(f, d, "extent", nd, true, false, problems);
  if (sp) check_numbers(f, d, "spacing", true, problems);
  if (ex) check_numbers(f, d, "extent", true, problems);
  if (attr_ok(f, d, "origin", nd, false, false, problems))
    check_numbers(f, d, "origin", false, problems);
  if (!sp || !ex) return;
  const auto s = f.attr_doubles(d, "spacing"), e = f.attr_doubles(d, "extent");
  for (std::size_t k = 0; k < nd; ++k) {
    const double span = static_cast<double>(shape[k + 2] - 1) * s[k];
    if (std::isfinite(span) && span > e[k] * (1 + 1e-6)) {
      problems.push_back(f.where(d) + ": spatial dim " + std::to_string(k) + " has " +
                         std::to_string(shape[k + 2]) + " nodes at spacing " +
                         std::to_string(s[k]) + ", which span " + std::to_string(span) +
                         ", more than its extent " + std::to_string(e[k]));
      return;
    }
  }
}

// mean, std, min, max (all or none, C finite numbers each, std >= 0, min <= mean <= max)
// and stats_count (the values per channel of this dataset).
void check_stats(const File& f, const std::string& d, std::size_t C, Index per_channel,
                 Problems& problems) {
  int present = 0;
  bool ok = true;
  for (const char* s : {"mean", "std", "min", "max"})
    if (f.has_attr(d, s)) {
      ++present;
      ok = attr_ok(f, d, s, C, false, false, problems) && ok;
      if (ok) check_numbers(f, d, s, false, problems);
    }
  if (present != 0 && present != 4) {
    problems.push_back(f.where(d) +
                       ": attributes mean, std, min and max come together (tessera-prep stats)");
    return;
  }
  if (present == 4 && ok) {
    const auto mean = f.attr_doubles(d, "mean"), sd = f.attr_doubles(d, "std"),
               mn = f.attr_doubles(d, "min"), mx = f.attr_doubles(d, "max");
    for (std::size_t c = 0; c < C; ++c)
      if (!(sd[c] >= 0) || !(mn[c] <= mean[c] && mean[c] <= mx[c])) {
        problems.push_back(f.where(d) + ": channel " + std::to_string(c) +
                           " statistics contradict each other (mean " + std::to_string(mean[c]) +
                           ", std " + std::to_string(sd[c]) + ", min " + std::to_string(mn[c]) +
                           ", max " + std::to_string(mx[c]) + ")");
        break;
      }
  }
  if (attr_ok(f, d, "stats_count", 1, false, false, problems)) {
    const double n = f.attr_doubles(d, "stats_count")[0];
    if (n != static_cast<double>(per_channel))
      problems.push_back(f.where(d) + ": attribute 'stats_count' is " + shortest(n) +
                         ", the dataset has " + std::to_string(per_channel) +
                         " values per channel");
  }
}

// The root's version: one integer (an HDF5 integer type; floating-point values, even 1.0,
// are refused as the schema stores int64) in 1..kVersion.
void check_version(const File& f, Problems& problems) {
  const std::string file = "'" + f.path() + "': ";
  if (!f.has_attr("/", kVersionAttr)) {
    problems.push_back(file + "missing root attribute '" + kVersionAttr +
                       "' (not written by a Tessera tool, or older than the schema)");
    return;
  }
  const std::string attr = std::string("root attribute '") + kVersionAttr + "'";
  Handle a(check(H5Aopen(f.id(), kVersionAttr, H5P_DEFAULT), "opening " + attr));
  Handle type(check(H5Aget_type(a.get()), "type of " + attr));
  Handle space(check(H5Aget_space(a.get()), "dataspace of " + attr));
  const H5T_class_t cls = H5Tget_class(type.get());
  const hssize_t count = H5Sget_simple_extent_npoints(space.get());
  if (cls == H5T_STRING) {
    const std::vector<std::string> v = f.attr_strings("/", kVersionAttr);
    problems.push_back(file + attr + " is a string" + (v.size() == 1 ? " '" + v[0] + "'" : "") +
                       ", not an integer: the schema stores the version as an integer (int64)");
    return;
  }
  if (count != 1) {
    problems.push_back(file + attr + " holds " + std::to_string(count) +
                       " values, not one integer");
    return;
  }
  const double v = f.attr_doubles("/", kVersionAttr)[0];
  std::ostringstream shown;
  if (cls == H5T_INTEGER) {
    // Read as the 64-bit integer of its sign, so 2^53 + 1 or 2^64 - 1 print as stored.
    const bool is_signed = H5Tget_sign(type.get()) != H5T_SGN_NONE;
    std::int64_t i = 0;
    std::uint64_t u = 0;
    check(H5Aread(a.get(), is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64,
                  is_signed ? static_cast<void*>(&i) : static_cast<void*>(&u)),
          "reading " + attr, 0);
    if (is_signed)
      shown << i;
    else
      shown << u;
  } else {
    shown << std::setprecision(17) << v << (cls == H5T_FLOAT && v == std::floor(v) ? ".0" : "");
  }
  if (cls != H5T_INTEGER) {
    problems.push_back(file + attr + " is the " +
                       (cls == H5T_FLOAT ? "floating-point number " : "non-integer value ") +
                       shown.str() +
                       ", not an integer: the schema stores the version as an "
                       "integer (int64)");
    return;
  }
  if (v < 1 || v > static_cast<double>(kVersion))
    problems.push_back(file + "schema version " + shown.str() +
                       " is not one this build reads (1.." + std::to_string(kVersion) + ")");
}

// Where the schema puts a dataset: /fields/NAME (directly under /fields), /points/coords,
// /points/features.
bool schema_dataset_path(const std::string& path) {
  const std::string fields_prefix = std::string(kFields) + "/";
  return (path.rfind(fields_prefix, 0) == 0 &&
          path.find('/', fields_prefix.size()) == std::string::npos) ||
         path == kCoords || path == kFeatures;
}

struct Link {
  std::string path;
  H5L_type_t type;
};

herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* out) {
  std::string path(1, '/');
  path.append(name);  // (not "/" + std::string(name): GCC 12 warns falsely of overlap there)
  static_cast<std::vector<Link>*>(out)->push_back({path, info->type});
  return 0;
}

// Links that lead nowhere (a dangling soft link, an external link to a missing file or
// object), and a group or named type where the schema puts a dataset: each a problem, as
// the apps would fail to open them. Resolving an external link opens its file (with this
// file's access properties: collectively, every rank in the same order).
void check_links(const File& f, Problems& problems) {
  std::vector<Link> links;
  check(H5Lvisit(f.id(), H5_INDEX_NAME, H5_ITER_INC, collect_link, &links),
        "listing the links of '" + f.path() + "'", 0);
  const std::string in = " in '" + f.path() + "'";
  for (const Link& l : links) {
    if (l.type == H5L_TYPE_SOFT || l.type == H5L_TYPE_EXTERNAL) {
      H5L_info_t info{};
      std::string target = "?";
      if (H5Lget_info(f.id(), l.path.c_str(), &info, H5P_DEFAULT) >= 0 && info.u.val_size > 0) {
        std::vector<char> val(info.u.val_size + 1, '\0');
        if (H5Lget_val(f.id(), l.path.c_str(), val.data(), val.size(), H5P_DEFAULT) >= 0) {
          const char* file = nullptr;
          const char* obj = nullptr;
          unsigned flags = 0;
          if (l.type == H5L_TYPE_SOFT)
            target = "'" + std::string(val.data()) + "'";
          else if (H5Lunpack_elink_val(val.data(), val.size(), &flags, &file, &obj) >= 0)
            target = "'" + std::string(obj ? obj : "?") + "' in the file '" +
                     std::string(file ? file : "?") + "'";
        }
      }
      const htri_t found = H5Oexists_by_name(f.id(), l.path.c_str(), H5P_DEFAULT);
      H5Eclear2(H5E_DEFAULT);
      if (found <= 0)
        problems.push_back("'" + l.path + "'" + in + " is " +
                           (l.type == H5L_TYPE_SOFT ? "a soft link to " : "an external link to ") +
                           target + ", which does not exist" +
                           (l.type == H5L_TYPE_SOFT ? " (a dangling link)"
                                                    : " (the file or the object is missing)") +
                           ": the data cannot be read through it");
      continue;
    }
    if (l.type != H5L_TYPE_HARD || !schema_dataset_path(l.path)) continue;
    Handle o(check(H5Oopen(f.id(), l.path.c_str(), H5P_DEFAULT), "opening '" + l.path + "'" + in));
    const H5I_type_t t = H5Iget_type(o.get());
    // A group holding datasets: those are reported, each as not part of the schema.
    if (t != H5I_DATASET && (t != H5I_GROUP || f.datasets(l.path).empty()))
      problems.push_back("'" + l.path + "'" + in + " is a " +
                         (t == H5I_GROUP ? "group" : "named datatype") +
                         ", where the schema wants a dataset");
  }
}

// Collective: the first non-finite value of `dset` in row-major order ("" if none), read in
// pieces of at most piece_bytes() per rank (io/pieces.hpp: a sample of any size is streamed,
// never held whole), each sample split over the ranks along its largest dim after N. Stops
// after the first sample that holds one.
template <class T>
Index first_bad_in(const Tensor& t) {
  const T* x = t.data<T>();
  for (Index i = 0; i < t.numel(); ++i)
    if (!std::isfinite(x[i])) return i;
  return -1;
}

// The problem of a dataset's first non-finite value (by either scan of validate).
std::string non_finite_text(const File& f, const std::string& dset, double value,
                            const std::vector<Index>& at) {
  return f.where(dset) + ": non-finite value " + std::to_string(value) + " at index " +
         shape_str(at) + " (the first in row-major order)";
}

std::string first_non_finite(const File& f, const std::string& dset, const DatasetInfo& in,
                             const Progress& progress) {
  const std::vector<Index>& shape = in.shape;
  const int nd = static_cast<int>(shape.size());
  const DType dt = *in.dtype;
  int rank = 0, P = 1;
  MPI_Comm_rank(f.comm(), &rank);
  MPI_Comm_size(f.comm(), &P);
  int split = 1;
  for (int d = 2; d < nd; ++d)
    if (shape[static_cast<std::size_t>(d)] > shape[static_cast<std::size_t>(split)]) split = d;
  const ShareScan plan(f.comm(), shape, split, dt, progress);
  const SamplePieces& pieces = plan.pieces;
  const long long calls = plan.calls;
  const PieceProgress& report = plan.report;
  const Box whole = Box::from_shape(shape);
  for (Index n = 0; n < shape[0]; ++n) {
    // This rank's first bad value in the sample, as a flat index of the dataset.
    long bad = std::numeric_limits<long>::max();
    double value = 0;
    for (long long c = 0; c < calls; ++c) {
      const Box box = pieces.piece(n, static_cast<Index>(c));
      const Tensor t = read_slab(f, dset, box, dt);
      if (bad == std::numeric_limits<long>::max() && t.numel() > 0) {
        const Index i = dt == DType::f32 ? first_bad_in<float>(t) : first_bad_in<double>(t);
        if (i >= 0) {
          std::vector<Index> at(static_cast<std::size_t>(nd));
          delinearize(box, i, at.data());
          bad = linear_index(whole, at.data());
          value = dt == DType::f32 ? static_cast<double>(t.data<float>()[i]) : t.data<double>()[i];
        }
      }
      report(n, c);
    }
    if (calls == 0) report(n, 0);
    struct {
      long index;
      int rank;
    } here{bad, rank}, first{0, 0};
    MPI_Allreduce(&here, &first, 1, MPI_LONG_INT, MPI_MINLOC, f.comm());
    if (first.index != std::numeric_limits<long>::max()) {
      MPI_Bcast(&value, 1, MPI_DOUBLE, first.rank, f.comm());
      std::vector<Index> at(static_cast<std::size_t>(nd));
      delinearize(whole, static_cast<Index>(first.index), at.data());
      return non_finite_text(f, dset, value, at);
    }
  }
  return "";
}

// Whether `in` carries the four statistics attributes with one number per channel (else
// check_stats has said what is wrong with them, and there is nothing to compare).
bool stored_stats_usable(const File& f, const DatasetInfo& in) {
  const int cdim = channel_dim_of(in.name);
  if (cdim >= static_cast<int>(in.shape.size())) return false;
  const auto C = static_cast<std::size_t>(in.shape[static_cast<std::size_t>(cdim)]);
  for (const char* a : {"mean", "std", "min", "max"})
    if (!f.has_attr(in.name, a) || f.attr_is_string(in.name, a) ||
        f.attr_doubles(in.name, a).size() != C)
      return false;
  return true;
}

// The scan of first_non_finite, and the stored statistics against the data's: min and max
// are exact at any rank count, so any difference means the values changed after `tessera-prep
// stats` (the mean within 1e-6 of its scale: its last bits depend on the rank count, and a
// tool that summed in float32 is off by more than those).
std::string stale_stats(const File& f, const DatasetInfo& in, const Progress& progress) {
  const ChannelStats s = scan(f, in.name, channel_dim_of(in.name), progress);
  if (!s.first_bad.empty()) return non_finite_text(f, in.name, s.first_bad_value, s.first_bad);
  const auto mean = f.attr_doubles(in.name, "mean"), sd = f.attr_doubles(in.name, "std"),
             mn = f.attr_doubles(in.name, "min"), mx = f.attr_doubles(in.name, "max");
  for (std::size_t c = 0; c < s.mean.size(); ++c) {
    const double scale = std::abs(s.mean[c]) + s.std[c];
    if (mn[c] == s.min[c] && mx[c] == s.max[c] && std::abs(mean[c] - s.mean[c]) <= 1e-6 * scale)
      continue;
    std::ostringstream os;
    os << std::setprecision(9) << f.where(in.name) << ": channel " << c
       << " statistics do not describe the data (stored mean " << mean[c] << ", min " << mn[c]
       << ", max " << mx[c] << "; the data's " << s.mean[c] << ", " << s.min[c] << ", " << s.max[c]
       << "): the values changed after tessera-prep stats; run it again";
    return os.str();
  }
  return "";
}

}  // namespace

std::vector<std::string> validate(const File& f, const std::vector<Expectation>& expect,
                                  bool check_values, const DatasetProgress& progress) {
  Problems problems;
  check_version(f, problems);
  if (f.has_attr("/", "generator") && !f.attr_is_string("/", "generator"))
    problems.push_back("'" + f.path() + "': root attribute 'generator' must be a string");
  check_links(f, problems);
  for (const Expectation& e : expect) {
    if (!f.exists(e.dataset)) {
      problems.push_back("missing " + f.where(e.dataset));
      continue;
    }
    try {
      f.open_dataset(e.dataset, dtype_from_name(e.dtype.empty() ? "float32" : e.dtype), e.shape);
    } catch (const Error& err) {
      problems.push_back(err.what());
    }
  }
  const std::vector<std::string> all = f.datasets();
  if (all.empty()) problems.push_back("'" + f.path() + "' holds no datasets");
  std::map<Index, std::string> sample_counts;  // each count and a dataset that holds it
  std::vector<DatasetInfo> to_scan;  // the values are checked after every rule of metadata
  // The objects the schema's paths name: a soft link there may lead anywhere in the file,
  // and the dataset behind it is the schema's, not stray data.
  std::set<std::pair<unsigned long, haddr_t>> schema_objects;
  for (const std::string& d : all) {
    H5O_info_t o{};
    if (schema_dataset_path(d) && H5Oget_info_by_name(f.id(), d.c_str(), &o, H5P_DEFAULT) >= 0)
      schema_objects.insert({o.fileno, o.addr});
  }
  H5Eclear2(H5E_DEFAULT);
  const auto behind_schema_link = [&](const std::string& d) {
    H5O_info_t o{};
    const bool in = H5Oget_info_by_name(f.id(), d.c_str(), &o, H5P_DEFAULT) >= 0 &&
                    schema_objects.count({o.fileno, o.addr}) > 0;
    H5Eclear2(H5E_DEFAULT);
    return in;
  };
  for (const std::string& d : all) {
    const DatasetInfo in = f.info(d);
    const bool field = schema_dataset_path(d) && d != kCoords && d != kFeatures;
    const bool coords = d == kCoords, feats = d == kFeatures;
    if (!field && !coords && !feats) {
      if (behind_schema_link(d)) continue;  // checked under its schema path
      problems.push_back(f.where(d) + ": not part of the schema (expected /fields/NAME, " +
                         kCoords + " or " + kFeatures + ")");
      continue;
    }
    if (in.dtype != DType::f32)
      problems.push_back(f.where(d) + " holds " + in.type_name + ", the schema wants float32");
    const std::size_t nd = in.shape.size();
    if (field && (nd < 3 || nd > 5)) {
      problems.push_back(f.where(d) + " has shape " + shape_str(in.shape) +
                         ", a field needs (N, C, spatial...) with 1 to 3 spatial dims");
      continue;
    }
    if ((coords || feats) && nd != 3) {
      problems.push_back(f.where(d) + " has shape " + shape_str(in.shape) +
                         ", points need (N, P, " + (coords ? "3" : "C") + ")");
      continue;
    }
    if (coords && in.shape[2] != 3)
      problems.push_back(f.where(d) + " has shape " + shape_str(in.shape) + ", expected (N, P, 3)");
    if (in.shape[0] == 0) {
      problems.push_back(f.where(d) + " holds 0 samples");
      continue;
    }
    if (std::find(in.shape.begin(), in.shape.end(), Index{0}) != in.shape.end()) {
      problems.push_back(f.where(d) + " has shape " + shape_str(in.shape) + " with an empty dim");
      continue;
    }
    sample_counts.emplace(in.shape[0], d);  // the first dataset of each count
    for (const std::string& a : f.attr_names(d))
      if (!known_attrs().count(a) || (coords && a == "variables"))
        problems.push_back(f.where(d) + ": attribute '" + a + "' is not part of the schema");
    const std::size_t C = static_cast<std::size_t>(in.shape[field ? 1 : 2]);
    Index per_channel = 1;
    for (std::size_t k = 0; k < nd; ++k)
      if (k != (field ? 1u : 2u)) per_channel *= in.shape[k];
    if (field || feats) check_variables(f, d, C, problems);
    if (field) check_grid(f, d, in.shape, problems);
    check_stats(f, d, C, per_channel, problems);
    if (coords && f.exists(kFeatures) && f.info(kFeatures).shape.size() == 3) {
      const DatasetInfo fe = f.info(kFeatures);
      if (fe.shape[0] != in.shape[0] || fe.shape[1] != in.shape[1])
        problems.push_back(f.where(kFeatures) + " has shape " + shape_str(fe.shape) +
                           ", its (N, P) must match " + kCoords + " " + shape_str(in.shape));
    }
    // Never or partly written: no data (or fill values) where the schema wants data.
    if (const std::string why = storage_problem(f, d); !why.empty()) {
      problems.push_back(why);
      continue;
    }
    // A filter this HDF5 lacks (h5py's lzf): the apps cannot read the values.
    const std::string missing = unavailable_filter(f, d);
    if (!missing.empty())
      problems.push_back(missing);
    else if (check_values && (in.dtype == DType::f32 || in.dtype == DType::f64) && C > 0)
      to_scan.push_back(in);
  }
  if (sample_counts.size() > 1) {
    std::string counts;
    for (const auto& [n, d] : sample_counts)
      counts += (counts.empty() ? "" : ", ") + std::string("'") + d + "' " + std::to_string(n);
    problems.push_back("'" + f.path() + "': datasets disagree on the sample count N (" + counts +
                       "): every dataset of a file holds the same samples");
  }
  for (const DatasetInfo& in : to_scan) {
    Progress of_this;
    if (progress)
      of_this = [&](Index done, Index total, double bytes) {
        progress(in.name, done, total, bytes);
      };
    const std::string bad = stored_stats_usable(f, in)
                                ? stale_stats(f, in, of_this)  // reads the values once too
                                : first_non_finite(f, in.name, in, of_this);
    if (!bad.empty()) problems.push_back(bad);
  }
  return problems;
}

void require_valid(const File& f) {
  const Problems p = validate(f, {}, false);
  if (!p.empty())
    throw Error(p.front() + " (the file fails the schema; tessera-prep validate lists every " +
                "problem)");
}

}  // namespace tessera::io::schema
