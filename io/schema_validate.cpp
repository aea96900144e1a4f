// schema::validate: every rule of the schema (io/schema.hpp), each violation naming the
// dataset and the attribute or value at fault, in the order the rules are listed there.
#include <algorithm>
#include <cmath>
#include <set>

#include "decomp/error.hpp"
#include "io/schema.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::io::schema {
namespace {

using Problems = std::vector<std::string>;

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

// Numbers that must be finite (and, with positive, > 0).
void check_numbers(const File& f, const std::string& d, const std::string& name, bool positive,
                   Problems& problems) {
  const std::vector<double> v = f.attr_doubles(d, name);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]) || (positive && !(v[i] > 0))) {
      problems.push_back(f.where(d) + ": attribute '" + name + "' entry " + std::to_string(i) +
                         " is " + std::to_string(v[i]) + ", must be finite" +
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
      problems.push_back(f.where(d) + ": attribute 'stats_count' is " + std::to_string(n) +
                         ", the dataset has " + std::to_string(per_channel) +
                         " values per channel");
  }
}

}  // namespace

std::vector<std::string> validate(const File& f, const std::vector<Expectation>& expect,
                                  bool check_values, const Progress& progress) {
  Problems problems;
  if (!f.has_attr("/", kVersionAttr)) {
    problems.push_back("'" + f.path() + "': missing root attribute '" + kVersionAttr +
                       "' (not written by a Tessera tool, or older than the schema)");
  } else {
    const auto v = f.attr_is_string("/", kVersionAttr) ? std::vector<double>{}
                                                       : f.attr_doubles("/", kVersionAttr);
    if (v.size() != 1 || v[0] < 1 || v[0] > static_cast<double>(kVersion) ||
        v[0] != std::floor(v[0]))
      problems.push_back("'" + f.path() + "': schema version " +
                         (v.size() == 1 ? std::to_string(v[0]) : std::string("?")) +
                         " is not one this build reads (1.." + std::to_string(kVersion) + ")");
  }
  if (f.has_attr("/", "generator") && !f.attr_is_string("/", "generator"))
    problems.push_back("'" + f.path() + "': root attribute 'generator' must be a string");
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
  std::set<Index> samples;
  const std::string fields_prefix = std::string(kFields) + "/";
  for (const std::string& d : all) {
    const DatasetInfo in = f.info(d);
    // A field is /fields/NAME itself, not a dataset in a group below it.
    const bool field =
        d.rfind(fields_prefix, 0) == 0 && d.find('/', fields_prefix.size()) == std::string::npos;
    const bool coords = d == kCoords, feats = d == kFeatures;
    if (!field && !coords && !feats) {
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
    samples.insert(in.shape[0]);
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
    if (coords && f.exists(kFeatures)) {
      const DatasetInfo fe = f.info(kFeatures);
      if (fe.shape.size() == 3 && (fe.shape[0] != in.shape[0] || fe.shape[1] != in.shape[1]))
        problems.push_back(f.where(kFeatures) + " has shape " + shape_str(fe.shape) +
                           ", its (N, P) must match " + kCoords + " " + shape_str(in.shape));
    }
    if (check_values && (in.dtype == DType::f32 || in.dtype == DType::f64) && C > 0) {
      const ChannelStats s = scan(f, d, field ? 1 : 2, progress);
      if (!s.first_bad.empty())
        problems.push_back(f.where(d) + ": non-finite value " + std::to_string(s.first_bad_value) +
                           " at index " + shape_str(s.first_bad) +
                           " (the first in row-major order)");
    }
  }
  if (samples.size() > 1)
    problems.push_back("'" + f.path() + "': datasets disagree on the sample count N");
  return problems;
}

void require_valid(const File& f) {
  const Problems p = validate(f, {}, false);
  if (!p.empty())
    throw Error(p.front() + " (the file fails the schema; tessera-prep validate lists every " +
                "problem)");
}

}  // namespace tessera::io::schema
