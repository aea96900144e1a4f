// tessera-prep validate: shapes, dtypes, required attributes and NaN/Inf.
#include <algorithm>
#include <iostream>
#include <optional>

#include "apps/prep/common.hpp"
#include "apps/prep/progress.hpp"

namespace tessera::prep {
namespace {

int run(Context& ctx, const cli::Args& a) {
  if (a.positional().size() != 1) throw Error("validate needs one HDF5 file (see --help)");
  const io::File f = io::File::open(a.positional()[0], ctx.world());
  std::vector<io::schema::Expectation> expect;
  if (a.has("dataset")) {
    io::schema::Expectation e;
    e.dataset = a.str("dataset");
    if (a.has("dtype")) e.dtype = a.str("dtype");
    if (a.has("shape")) e.shape = a.shape_pattern("shape");
    expect.push_back(e);
  } else if (a.has("shape") || a.has("dtype")) {
    throw Error("--shape and --dtype need --dataset");
  }
  // One progress line per dataset scanned: "[validate /fields/u] K/T, ...".
  std::optional<Progress> progress;
  std::string scanning;
  auto problems = io::schema::validate(
      f, expect, !a.flag("no-values"),
      [&](const std::string& dataset, Index done, Index total, double bytes) {
        if (!progress || dataset != scanning)
          scanning = dataset,
          progress.emplace(ctx.world(), "validate " + dataset, 0, 0, a.flag("quiet"));
        progress->update_bytes(done, total, bytes);
      });
  // Beyond the schema, so that files holding one still load (the variable unread): a
  // /points/features variable named "coords", which a config's "coords" (/points/coords)
  // shadows, could never be chosen.
  if (f.exists(io::schema::kFeatures) && f.has_attr(io::schema::kFeatures, "variables")) {
    std::vector<std::string> names;
    try {
      names = f.attr_strings(io::schema::kFeatures, "variables");
    } catch (const Error&) {  // not strings: the schema's problem, said above
    }
    if (std::find(names.begin(), names.end(), "coords") != names.end())
      problems.push_back(f.where(io::schema::kFeatures) +
                         ": attribute 'variables' names 'coords', the name of /points/coords "
                         "(data.inputs = [\"coords\", ...]): this variable could never be chosen");
  }
  if (problems.empty()) {
    if (ctx.rank() == 0)
      std::cout << f.path() << ": valid (schema version " << io::schema::kVersion << ")\n";
    return 0;
  }
  // One problem: the error line says it. Several: each listed once, the error names the first.
  if (ctx.rank() == 0 && problems.size() > 1)
    for (const auto& p : problems) std::cout << "invalid: " << p << "\n";
  throw Error(problems.front() +
              (problems.size() > 1
                   ? " (and " + std::to_string(problems.size() - 1) + " more, listed above)"
                   : ""));
}

}  // namespace

Command validate_command() {
  return {"validate",
          "tessera-prep validate F.h5 [--dataset D --shape S --dtype T]",
          "Checks the file against the schema: version attribute, dataset shapes and element\n"
          "types, required attributes, matching sample counts, and that every value is finite\n"
          "(read in parallel). Exits 0 if the file is good, else 1 with a message naming the\n"
          "dataset and, for NaN/Inf, the first bad index. --dataset with --shape/--dtype also\n"
          "demands that dataset exist with that shape (-1 matches any extent) and type.",
          {{"dataset", "D", "a dataset that must exist, e.g. /fields/u", ""},
           {"shape", "S", "its required shape, e.g. 4,1,64,64", ""},
           {"dtype", "T", "its required element type", "float32"},
           {"no-values", "", "skip the NaN/Inf scan", ""},
           {"quiet", "", "no progress output", ""}},
          run};
}

}  // namespace tessera::prep
