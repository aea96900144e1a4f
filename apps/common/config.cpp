#include "apps/common/config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <variant>

#include "apps/common/cli.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::app {
namespace {

[[noreturn]] void fail(const std::string& msg) {
  throw Error("config: " + msg);
}

// The kinds of keys: integer, number, boolean, string, array of strings, and integers (one
// value, or an array of them: one per spatial dim).
using Ref = std::variant<std::int64_t*, double*, bool*, std::string*, std::vector<std::string>*,
                         std::vector<std::int64_t>*>;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Range {
  double lo = -kInf, hi = kInf;
  bool lo_open = false, hi_open = false;
};

struct Field {
  const char* section;
  const char* key;
  Ref (*ref)(TrainConfig&);
  const char* help;
  Range range = {};
  std::vector<std::string> choices = {};
  std::string name() const { return std::string(section) + "." + key; }
};

#define TESSERA_FIELD(sec, k) #sec, #k, [](TrainConfig & c) -> Ref { return &c.sec.k; }

const Range kPositive{0, kInf, true, false};
const Range kNonNegative{0, kInf, false, false};
const Range kUnitOpen{0, 1, false, true};  // [0, 1)
const Range kAtLeastOne{1, kInf, false, false};

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      {TESSERA_FIELD(mesh, shape),
       "mesh axes and sizes: 'domain=4,data=2', 'domain=auto,data=2' or 'auto' (all ranks on one "
       "domain axis)"},
      {TESSERA_FIELD(data, path), "HDF5 dataset file (tessera-prep schema)"},
      {TESSERA_FIELD(data, inputs), "input fields, in channel order"},
      {TESSERA_FIELD(data, targets), "target fields, in channel order"},
      {TESSERA_FIELD(data, normalize), "normalize each field by the training split's mean and std"},
      {TESSERA_FIELD(data, shuffle), "shuffle training samples every epoch (seeded by train.seed)"},
      {TESSERA_FIELD(data, stream),
       "read each batch's blocks from the file as it is drawn instead of holding every "
       "sample's block in memory (a dataset larger than the ranks' memory; the same numbers; "
       "the checks and statistics scan the file at the start)"},
      {TESSERA_FIELD(model, type),
       "model architecture",
       {},
       {"unet", "fno", "transolver", "pointconv", "vit"}},
      {TESSERA_FIELD(model, width),
       "unet: channels of the first level (doubled per level down); fno: channels of the Fourier "
       "blocks; transolver, pointconv: channels of the blocks",
       kAtLeastOne},
      {TESSERA_FIELD(model, modes),
       "fno: retained Fourier modes per spatial dim: one value for every dim, or one per dim "
       "([16, 8])",
       kAtLeastOne},
      {TESSERA_FIELD(model, layers), "fno: Fourier blocks; transolver, pointconv: blocks",
       Range{1, 64, false, false}},
      {TESSERA_FIELD(model, projection), "fno: hidden channels of the projection", kAtLeastOne},
      {TESSERA_FIELD(model, weights),
       "fno: spectral weights replicated on every rank, or sharded by mode (each rank holds and "
       "updates the modes of its spectrum block; no weight gradient is reduced over the domain)",
       {},
       {"replicated", "mode_sharded"}},
      {TESSERA_FIELD(model, heads),
       "transolver, vit: attention heads (must divide model.width, model.dim)", kAtLeastOne},
      {TESSERA_FIELD(model, slices), "transolver: physics-attention slices per head", kAtLeastOne},
      {TESSERA_FIELD(model, neighbours), "pointconv: neighbours per point (nearest first)",
       kAtLeastOne},
      {TESSERA_FIELD(model, patch), "vit: patch edge in cells (divides each grid extent)",
       Range{1, 65536}},  // a patch's weight (dim x C x patch^d) stays far inside Index
      {TESSERA_FIELD(model, dim), "vit: channels of the tokens (divisible by model.heads)",
       kAtLeastOne},
      {TESSERA_FIELD(model, positions),
       "vit: fixed sinusoidal position embeddings, or a learned table per patch of the training "
       "grid (sharded with the patches; interpolated on another grid)",
       {},
       {"sinusoidal", "learned"}},
      {TESSERA_FIELD(model, attention),
       "vit: global attention (its algorithm over the ranks) or neighbourhood attention",
       {},
       {"auto", "ring", "all_to_all", "all_gather", "neighbourhood"}},
      {TESSERA_FIELD(model, window),
       "vit, neighbourhood attention: tokens per dim each token attends to", kAtLeastOne},
      {TESSERA_FIELD(model, radius),
       "pointconv: > 0: the neighbours within this radius (at most model.neighbours), 0: the "
       "k nearest; in the coordinates the model sees (per-axis standardized when "
       "data.normalize)",
       kNonNegative},
      {TESSERA_FIELD(model, depth), "unet: number of levels down (and up); vit: transformer blocks",
       Range{1, 64, false, false}},
      {TESSERA_FIELD(model, kernel_size), "conv kernel size per spatial dim", kAtLeastOne},
      {TESSERA_FIELD(model, norm), "normalization layer", {}, {"group", "batch", "none"}},
      {TESSERA_FIELD(model, groups), "GroupNorm groups (must divide every level's width)",
       kAtLeastOne},
      {TESSERA_FIELD(model, activation), "activation", {}, {"gelu", "relu", "silu", "tanh"}},
      {TESSERA_FIELD(model, down),
       "downsampling: max pooling or strided conv",
       {},
       {"pool", "conv"}},
      {TESSERA_FIELD(model, up),
       "upsampling: nearest upsample + conv, or transposed conv",
       {},
       {"upsample", "transposed_conv"}},
      {TESSERA_FIELD(model, padding),
       "unet: the convolutions' \"same\" padding at the domain's border (PyTorch's "
       "padding_mode): zeros, circular (a periodic domain), reflect or replicate",
       {},
       {"zeros", "circular", "reflect", "replicate"}},
      {TESSERA_FIELD(model, dtype), "parameter and activation type", {}, {"float32", "float64"}},
      {TESSERA_FIELD(optim, name), "optimizer (PyTorch semantics)", {}, {"sgd", "adam", "adamw"}},
      {TESSERA_FIELD(optim, lr), "base learning rate", kPositive},
      {TESSERA_FIELD(optim, weight_decay), "weight decay (L2 for sgd/adam, decoupled for adamw)",
       kNonNegative},
      {TESSERA_FIELD(optim, beta1), "adam/adamw beta1", kUnitOpen},
      {TESSERA_FIELD(optim, beta2), "adam/adamw beta2", kUnitOpen},
      {TESSERA_FIELD(optim, eps), "adam/adamw epsilon", kPositive},
      {TESSERA_FIELD(optim, momentum), "sgd momentum", kUnitOpen},
      {TESSERA_FIELD(optim, dampening), "sgd dampening", Range{0, 1, false, false}},
      {TESSERA_FIELD(optim, nesterov), "sgd nesterov momentum"},
      {TESSERA_FIELD(optim, grad_clip), "clip gradients to this global L2 norm; 0: off",
       kNonNegative},
      {TESSERA_FIELD(schedule, type),
       "learning-rate schedule",
       {},
       {"constant", "warmup", "cosine", "step"}},
      {TESSERA_FIELD(schedule, warmup_steps), "linear warm-up steps (warmup, cosine)",
       kNonNegative},
      {TESSERA_FIELD(schedule, min_lr), "final learning rate of the cosine schedule", kNonNegative},
      {TESSERA_FIELD(schedule, step_size), "steps between decays (step)", kAtLeastOne},
      {TESSERA_FIELD(schedule, gamma), "decay factor per step_size steps (step)",
       Range{0, 1, true, false}},
      {TESSERA_FIELD(train, steps), "optimizer steps (set this or train.epochs)", kNonNegative},
      {TESSERA_FIELD(train, epochs),
       "passes over the training split (set this or train.steps; the last batch may run into the "
       "next pass)",
       kNonNegative},
      {TESSERA_FIELD(train, batch_size), "global batch size over all data-parallel replicas",
       kAtLeastOne},
      {TESSERA_FIELD(train, accumulate),
       "micro-batches per step: forward and backward take batch_size / accumulate samples at a "
       "time, their gradients add up, then one all-reduce and update: the whole batch's step "
       "for a micro-batch's activation memory (batch norm: statistics per micro-batch)",
       Range{1, 65536, false, false}},
      {TESSERA_FIELD(train, loss), "training loss over the global domain", {}, {"mse", "rel_l2"}},
      {TESSERA_FIELD(train, checkpoint_interval), "steps between checkpoints; 0: only at the end",
       kNonNegative},
      {TESSERA_FIELD(train, checkpoint_dir), "directory of checkpoints"},
      {TESSERA_FIELD(train, validation_split), "fraction of samples held out for validation",
       kUnitOpen},
      {TESSERA_FIELD(train, resume), "resume from the latest checkpoint in checkpoint_dir"},
      {TESSERA_FIELD(train, metrics_csv), "write per-step metrics to this CSV file; empty: none"},
      {TESSERA_FIELD(train, seed),
       "seed of initialization and shuffling (32 bits: larger seeds folded in; the validation "
       "split is the last samples)",
       kNonNegative},
      {TESSERA_FIELD(train, log_interval), "steps between progress lines", kAtLeastOne},
      {TESSERA_FIELD(train, device_stats),
       "print rank 0's host<->device copies, bytes and kernel launches of each logged step"},
      {TESSERA_FIELD(train, keep_checkpoints),
       "newest checkpoints kept in checkpoint_dir (older ones removed); 0: keep all", kNonNegative},
      {TESSERA_FIELD(train, nonfinite),
       "on a non-finite loss or gradient: stop, or skip that step's update",
       {},
       {"stop", "skip_step"}},
      {TESSERA_FIELD(train, max_skips), "skip_step: stop after this many skipped steps in a row",
       kAtLeastOne},
      {TESSERA_FIELD(train, deterministic),
       "add halo-adjoint contributions in a fixed order: bitwise repeatable runs (false: in "
       "arrival order, see README for the cost)"},
      {TESSERA_FIELD(train, ghost_room),
       "write a conv's input into a buffer with the ghost room its halo exchange fills in "
       "place (false: plain shards copied into padded buffers; the same numbers)"},
      {TESSERA_FIELD(train, recompute),
       "activation checkpointing: keep only each model block's input and run the block's "
       "forward again in backward (less memory for one more forward; the same numbers)"},
      {TESSERA_FIELD(train, stop_signal),
       "the signal that stops training at the end of the step it reaches (validated and "
       "checkpointed; exit status 0), as SLURM's --signal=USR1@SECONDS sends before a time "
       "limit; none: the signal's default action (the process ends)",
       {},
       {"USR1", "USR2", "none"}},
  };
  return fields;
}
#undef TESSERA_FIELD

const std::vector<std::string>& sections() {
  static const std::vector<std::string> s = {"mesh", "data", "model", "optim", "schedule", "train"};
  return s;
}

std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidate within 2 edits of `word` (the closest, the first of equals), else "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = 3;  // suggest only close matches
  for (const std::string& c : candidates)
    if (const std::size_t d = edit_distance(word, c); d < best_d) best_d = d, best = c;
  return best;
}

std::string unknown_key_message(const std::string& section, const std::string& key,
                                const std::string& where) {
  std::vector<std::string> keys;
  for (const Field& f : schema())
    if (section == f.section) keys.push_back(f.key);
  const std::string best = closest(key, keys);
  std::string msg = "unknown key '" + section + "." + key + "' " + where;
  if (!best.empty()) msg += "; did you mean '" + section + "." + best + "'?";
  return msg + " (keys of [" + section + "]: " + join(keys) + ")";
}

const Field* find_field(const std::string& section, const std::string& key) {
  for (const Field& f : schema())
    if (section == f.section && key == f.key) return &f;
  return nullptr;
}

std::string type_name(const Ref& r) {
  switch (r.index()) {
    case 0:
      return "an integer";
    case 1:
      return "a number";
    case 2:
      return "a boolean (true or false)";
    case 3:
      return "a string";
    case 4:
      return "an array of strings";
    default:
      return "an integer or an array of integers";
  }
}

std::string toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

std::string at_line(const toml::source_region& region, const std::string& source) {
  const auto& b = region.begin;
  if (b.line == 0) return "in " + source;
  return "at " + source + ":" + std::to_string(b.line) + ":" + std::to_string(b.column);
}
std::string at_line(const toml::node& n, const std::string& source) {
  return at_line(n.source(), source);
}

// Assigns a TOML value to a field, checking its type.
void assign_node(const Field& f, const toml::node& n, TrainConfig& c, const std::string& where) {
  const Ref r = f.ref(c);
  auto wrong = [&] {
    fail(f.name() + " must be " + type_name(r) + ", got " + toml_type_name(n) + " " + where);
  };
  switch (r.index()) {
    case 0:
      if (!n.is_integer()) wrong();
      *std::get<0>(r) = *n.value<std::int64_t>();
      break;
    case 1:
      if (!n.is_number()) wrong();
      *std::get<1>(r) = *n.value<double>();
      break;
    case 2:
      if (!n.is_boolean()) wrong();
      *std::get<2>(r) = *n.value<bool>();
      break;
    case 3:
      if (!n.is_string()) wrong();
      *std::get<3>(r) = *n.value<std::string>();
      break;
    case 5: {
      std::vector<std::int64_t> v;
      if (n.is_integer()) {
        v.push_back(*n.value<std::int64_t>());
      } else if (const toml::array* a = n.as_array(); a && a->empty()) {
        fail(f.name() + " is an empty array: give one value, or one per dim " + where);
      } else if (a) {
        for (const toml::node& e : *a) {
          if (!e.is_integer())
            fail(f.name() + " must be an integer or an array of integers, but an element is " +
                 toml_type_name(e) + " " + where);
          v.push_back(*e.value<std::int64_t>());
        }
      } else {
        wrong();
      }
      *std::get<5>(r) = std::move(v);
      break;
    }
    default: {
      const toml::array* a = n.as_array();
      if (!a) wrong();
      std::vector<std::string> v;
      for (const toml::node& e : *a) {
        if (!e.is_string())
          fail(f.name() + " must be an array of strings, but an element is " + toml_type_name(e) +
               " " + where);
        v.push_back(*e.value<std::string>());
      }
      *std::get<4>(r) = std::move(v);
    }
  }
}

// Assigns a command-line value, parsed by the field's type.
void assign_text(const Field& f, const std::string& text, TrainConfig& c,
                 const std::string& where) {
  const Ref r = f.ref(c);
  auto wrong = [&] {
    fail(f.name() + " must be " + type_name(r) + ", got '" + text + "' " + where);
  };
  // A list (of strings or integers) in TOML array syntax is parsed as TOML.
  if ((r.index() == 4 || r.index() == 5) && !text.empty() && text.front() == '[') {
    toml::table t;
    try {
      t = toml::parse("v = " + text);
    } catch (const toml::parse_error&) {
      wrong();
    }
    return assign_node(f, *t.get("v"), c, where);
  }
  // Otherwise its comma-separated items (none for an empty text), none empty (getline would
  // drop a last empty one).
  auto items = [&] {
    std::vector<std::string> v;
    if (text.empty()) return v;
    if (text.back() == ',') wrong();
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
      if (item.empty()) wrong();
      v.push_back(item);
    }
    return v;
  };
  switch (r.index()) {
    case 0: {
      std::int64_t v = 0;
      const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || p != text.data() + text.size() || text.empty()) wrong();
      *std::get<0>(r) = v;
      break;
    }
    case 1: {
      double v = 0;
      const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || p != text.data() + text.size() || text.empty()) wrong();
      *std::get<1>(r) = v;
      break;
    }
    case 2:
      if (text == "true" || text == "1")
        *std::get<2>(r) = true;
      else if (text == "false" || text == "0")
        *std::get<2>(r) = false;
      else
        wrong();
      break;
    case 3:
      *std::get<3>(r) = text;
      break;
    case 5: {
      std::vector<std::int64_t> v;
      for (const std::string& item : items()) {
        std::int64_t x = 0;
        const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
        if (ec != std::errc() || p != item.data() + item.size()) wrong();
        v.push_back(x);
      }
      if (v.empty()) wrong();
      *std::get<5>(r) = std::move(v);
      break;
    }
    default:
      *std::get<4>(r) = items();
  }
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, p);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string format_value(const Ref& r) {
  switch (r.index()) {
    case 0:
      return std::to_string(*std::get<0>(r));
    case 1:
      return format_double(*std::get<1>(r));
    case 2:
      return *std::get<2>(r) ? "true" : "false";
    case 3:
      return quote(*std::get<3>(r));
    case 4: {
      std::vector<std::string> q;
      for (const auto& s : *std::get<4>(r)) q.push_back(quote(s));
      return "[" + join(q) + "]";
    }
    default: {
      const auto& v = *std::get<5>(r);
      if (v.size() == 1) return std::to_string(v[0]);
      std::vector<std::string> q;
      for (const std::int64_t x : v) q.push_back(std::to_string(x));
      return "[" + join(q) + "]";
    }
  }
}

// The accepted values; bounds of an integer key as integers ("must be >= 1", not 1.0).
std::string range_text(const Field& f, bool integer) {
  if (!f.choices.empty()) return "one of " + join(f.choices);
  const Range& g = f.range;
  auto bound = [&](double v) {
    return integer && std::isfinite(v) ? std::to_string(static_cast<long long>(v))
                                       : format_double(v);
  };
  if (g.lo == -kInf && g.hi == kInf) return "";
  if (g.hi == kInf) return std::string(g.lo_open ? "> " : ">= ") + bound(g.lo);
  return std::string(g.lo_open ? "(" : "[") + bound(g.lo) + ", " + bound(g.hi) +
         (g.hi_open ? ")" : "]");
}

// v (shown as `shown`) within f's range; for integers the bounds print as integers.
void check_value(const Field& f, const std::string& shown, double v, bool integer,
                 const char* each = "") {
  const Range& g = f.range;
  const bool ok =
      std::isfinite(v) && (g.lo_open ? v > g.lo : v >= g.lo) && (g.hi_open ? v < g.hi : v <= g.hi);
  if (!std::isfinite(v)) fail(f.name() + " = " + shown + " is not a finite number");
  if (!ok)
    fail(f.name() + " = " + shown + " is out of range: " + each + "must be " +
         range_text(f, integer));
}

void check_range(const Field& f, TrainConfig& c) {
  const Ref r = f.ref(c);
  if (!f.choices.empty()) {
    const std::string& v = *std::get<3>(r);
    if (std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end()) {
      const std::string best = closest(v, f.choices);  // "neighborhood" -> "neighbourhood"
      fail(f.name() + " = " + quote(v) + " is not " + range_text(f, false) +
           (best.empty() ? "" : "; did you mean " + quote(best) + "?"));
    }
    return;
  }
  switch (r.index()) {
    case 0:
      return check_value(f, format_value(r), static_cast<double>(*std::get<0>(r)), true);
    case 1:
      return check_value(f, format_value(r), *std::get<1>(r), false);
    case 5:
      for (const std::int64_t x : *std::get<5>(r))
        check_value(f, format_value(r), static_cast<double>(x), true,
                    std::get<5>(r)->size() > 1 ? "each value " : "");
      return;
    default:
      return;
  }
}

void apply_overrides(TrainConfig& c, const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) {
    const std::string where = "in --" + o;
    const auto eq = o.find('=');
    const auto dot = o.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      fail("override '--" + o + "' is not --section.key=value");
    const std::string section = o.substr(0, dot), key = o.substr(dot + 1, eq - dot - 1);
    if (std::find(sections().begin(), sections().end(), section) == sections().end())
      fail("unknown section '" + section + "' " + where + " (sections: " + join(sections()) + ")");
    const Field* f = find_field(section, key);
    if (!f) fail(unknown_key_message(section, key, where));
    assign_text(*f, o.substr(eq + 1), c, where);
  }
}

void validate(TrainConfig& c) {
  for (const Field& f : schema()) check_range(f, c);
  if (c.train.steps > 0 && c.train.epochs > 0)
    fail("train.steps = " + std::to_string(c.train.steps) +
         " and train.epochs = " + std::to_string(c.train.epochs) + " are both set; set only one");
  if (c.data.inputs.empty()) fail("data.inputs must name at least one field");
  if (c.data.targets.empty()) fail("data.targets must name at least one field");
  // A name twice would be read twice, and written twice by tessera-infer (which HDF5 and
  // the schema refuse).
  for (const auto* list : {&c.data.inputs, &c.data.targets})
    for (std::size_t i = 0; i < list->size(); ++i) {
      // A field is a dataset name under /fields (or a point variable): no path in it, or
      // tessera-infer would write its prediction elsewhere in the file.
      const std::string& name = (*list)[i];
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
        fail(std::string(list == &c.data.inputs ? "data.inputs" : "data.targets") + " names '" +
             name + "': a field name, not a path");
      for (std::size_t j = 0; j < i; ++j)
        if ((*list)[i] == (*list)[j])
          fail(std::string(list == &c.data.inputs ? "data.inputs" : "data.targets") + " names '" +
               (*list)[i] + "' twice");
    }
  if (c.model.kernel_size % 2 == 0)
    fail("model.kernel_size = " + std::to_string(c.model.kernel_size) +
         " must be odd (same-size convs)");
  if (c.model.type == "unet" && c.model.norm == "group" && c.model.width % c.model.groups != 0)
    fail("model.groups = " + std::to_string(c.model.groups) +
         " does not divide model.width = " + std::to_string(c.model.width));
}

// tessera-train's own options; any other dotted --section.key=value is a config override.
const std::vector<cli::Option>& train_options() {
  static const std::vector<cli::Option> options = {
      {"print-config", "", "print the resolved config as TOML and exit", ""},
      {"resume", "",
       "continue from the latest checkpoint in train.checkpoint_dir (= --train.resume=true)", ""},
      {"dry-run", "FORMAT",
       "print the FLOPs, bytes, halo and all-reduce volumes of one step per layer for --grid "
       "over --ranks, without data (table or json), and exit",
       ""},
      {"grid", "HxW", "dry run: the global grid (HxW or DxHxW)", ""},
      {"ranks", "N", "dry run: domain ranks (default: the ranks launched)", ""},
      {"batch", "N", "dry run: samples per step (default train.batch_size)", ""}};
  return options;
}

}  // namespace

TrainConfig parse_config(const std::string& text, const std::vector<std::string>& overrides,
                         const std::string& source) {
  TrainConfig c;
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    fail(source + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
         std::string(e.description()));
  }
  for (auto&& [skey, snode] : root) {
    const std::string section(skey.str());
    const toml::table* t = snode.as_table();
    const toml::array* tables = snode.as_array();
    if (tables && tables->is_array_of_tables())  // [[model]]: TOML's array of tables
      fail("[[" + section + "]] " + at_line(skey.source(), source) +
           " is an array of tables; a section is written [" + section + "]");
    if (!t)
      fail("key '" + section + "' " + at_line(skey.source(), source) +
           " is outside any section; keys belong in [" + join(sections(), "], [") + "]");
    if (std::find(sections().begin(), sections().end(), section) == sections().end())
      fail("unknown section [" + section + "] " + at_line(skey.source(), source) +
           " (sections: " + join(sections()) + ")");
    for (auto&& [kkey, knode] : *t) {
      const std::string key(kkey.str());
      const Field* f = find_field(section, key);
      if (!f) fail(unknown_key_message(section, key, at_line(kkey.source(), source)));
      assign_node(*f, knode, c, at_line(knode, source));
    }
  }
  apply_overrides(c, overrides);
  validate(c);
  return c;
}

TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse_config("", overrides, "(no file)");
  // A folder opens as an empty stream on Linux: it would read as an empty config.
  if (std::filesystem::is_directory(path)) fail("config file '" + path + "' is a directory");
  std::ifstream in(path);
  if (!in) fail("cannot open config file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), overrides, path);
}

TrainConfig load_config(MPI_Comm comm, const CliArgs& args) {
  TrainConfig c;
  collective_run(comm, [&] { c = load_config(args.config_path, args.overrides); });
  return c;
}

void check_complete(const TrainConfig& c) {
  if (c.data.path.empty()) fail("data.path is not set (in the config file or as --data.path=FILE)");
  // An empty directory name would put checkpoints (and their pruning) in the filesystem root.
  if (c.train.checkpoint_dir.empty())
    fail("train.checkpoint_dir is empty: name a directory (\".\" for the working directory)");
  if (c.train.steps == 0 && c.train.epochs == 0)
    fail(
        "train.steps and train.epochs are both 0 (unset): set one of them to the length of "
        "the run");
}

std::vector<std::string> unused_model_keys(const TrainConfig& c) {
  // The models that read each model key (dtype and type: all of them).
  static const std::vector<std::pair<std::string, std::vector<std::string>>> users = {
      {"width", {"unet", "fno", "transolver", "pointconv"}},
      {"modes", {"fno"}},
      {"layers", {"fno", "transolver", "pointconv"}},
      {"projection", {"fno"}},
      {"weights", {"fno"}},
      {"heads", {"transolver", "vit"}},
      {"slices", {"transolver"}},
      {"neighbours", {"pointconv"}},
      {"radius", {"pointconv"}},
      {"patch", {"vit"}},
      {"dim", {"vit"}},
      {"positions", {"vit"}},
      {"attention", {"vit"}},
      {"window", {"vit"}},
      {"depth", {"unet", "vit"}},
      {"kernel_size", {"unet"}},
      {"norm", {"unet"}},
      {"groups", {"unet"}},
      {"activation", {"unet", "fno"}},
      {"down", {"unet"}},
      {"up", {"unet"}},
      {"padding", {"unet"}}};
  TrainConfig set = c, defaults;
  std::vector<std::string> out;
  for (const auto& [key, models] : users) {
    const Field* f = find_field("model", key);
    const std::string value = format_value(f->ref(set));
    if (value == format_value(f->ref(defaults))) continue;
    const bool used = std::find(models.begin(), models.end(), c.model.type) != models.end();
    if (!used)
      out.push_back(f->name() + " = " + value + " is not used by model.type = " +
                    quote(c.model.type) + " (only by " + join(models) + ")");
    else if (key == "window" && c.model.attention != "neighbourhood")
      out.push_back(f->name() + " = " + value + " is not used with model.attention = " +
                    quote(c.model.attention) + " (only with \"neighbourhood\")");
    else if (key == "groups" && c.model.norm != "group")
      out.push_back(f->name() + " = " + value + " is not used with model.norm = " +
                    quote(c.model.norm) + " (only with \"group\")");
  }
  return out;
}

std::string to_toml(const TrainConfig& c) {
  TrainConfig copy = c;
  std::ostringstream os;
  std::string current;
  for (const Field& f : schema()) {
    if (current != f.section) {
      os << (current.empty() ? "" : "\n") << "[" << f.section << "]\n";
      current = f.section;
    }
    os << f.key << " = " << format_value(f.ref(copy)) << "\n";
  }
  return os.str();
}

std::string usage(const std::string& program) {
  TrainConfig defaults;
  std::ostringstream os;
  os << cli::help_text(
      program + " [CONFIG.toml] [--section.key=value ...] [--resume] [--print-config]",
      "Trains a model on sharded data. CONFIG is TOML with the sections below; every key\n"
      "can be set or overridden on the command line as --section.key=value.",
      train_options());
  std::string current;
  for (const Field& f : schema()) {
    if (current != f.section) {
      os << "\n[" << f.section << "]\n";
      current = f.section;
    }
    const Ref r = f.ref(defaults);
    static const char* kinds[] = {"INT", "FLOAT", "BOOL", "STRING", "LIST", "INT[,INT...]"};
    std::string flag = "  --" + f.name() + "=" + kinds[r.index()];
    os << flag << std::string(flag.size() < 34 ? 34 - flag.size() : 1, ' ') << f.help
       << " (default " << format_value(r);
    const std::string rt = range_text(f, r.index() == 0 || r.index() == 5);
    if (!rt.empty()) os << "; " << rt;
    os << ")\n";
  }
  return os.str();
}

std::vector<std::string> changed_settings(const TrainConfig& from, const TrainConfig& to) {
  // "section.key" -> value, from to_toml's lines, in its order.
  const auto settings = [](const TrainConfig& c) {
    std::vector<std::pair<std::string, std::string>> out;
    std::stringstream ss(to_toml(c));
    std::string section;
    for (std::string line; std::getline(ss, line);) {
      if (line.size() > 2 && line.front() == '[' && line.back() == ']') {
        section = line.substr(1, line.size() - 2);
        continue;
      }
      const std::size_t eq = line.find(" = ");
      if (eq == std::string::npos) continue;
      out.push_back({section + "." + line.substr(0, eq), line.substr(eq + 3)});
    }
    return out;
  };
  const auto a = settings(from), b = settings(to);
  std::vector<std::string> changed;
  for (const auto& [key, value] : b) {
    if (key == "train.resume") continue;
    std::string was = "(unset)";
    for (const auto& [k, v] : a)
      if (k == key) was = v;
    if (was != value) changed.push_back(key + ": " + was + " -> " + value);
  }
  return changed;
}

CliArgs parse_cli(const std::vector<std::string>& args) {
  const cli::Args a(args, train_options(), cli::Overrides::Accept);
  CliArgs c;
  c.help = a.help();
  c.print_config = a.flag("print-config");
  c.overrides = a.overrides();
  if (a.flag("resume")) c.overrides.push_back("train.resume=true");
  if (a.has("dry-run")) {
    c.dry_run = a.str("dry-run");
    if (c.dry_run != "table" && c.dry_run != "json")
      fail("--dry-run=" + c.dry_run + ": the format is table or json");
    if (!a.has("grid")) fail("--dry-run needs --grid (e.g. --grid=256x256)");
    c.dry_grid = a.shape("grid");
    if (c.dry_grid.empty() || c.dry_grid.size() > 3)
      fail("--grid=" + a.str("grid") + ": 1 to 3 spatial extents (e.g. --grid=256x256)");
    for (Index e : c.dry_grid)
      if (e < 1) fail("--grid=" + a.str("grid") + ": every extent is at least 1");
    if (a.has("ranks")) c.dry_ranks = static_cast<int>(a.integer_in("ranks", 1, 1 << 24));
    if (a.has("batch")) c.dry_batch = a.integer_in("batch", 1, Index{1} << 40);
  } else if (a.has("grid") || a.has("ranks") || a.has("batch")) {
    fail("--grid, --ranks and --batch belong to --dry-run");
  }
  const auto& files = a.positional();
  if (files.size() > 1) fail("two config files given: '" + files[0] + "' and '" + files[1] + "'");
  if (!files.empty()) c.config_path = files[0];
  return c;
}

CliArgs parse_cli(int argc, char** argv) {
  return parse_cli(std::vector<std::string>(argv + 1, argv + argc));
}

Mesh make_mesh(MPI_Comm comm, const std::string& spec, const std::string& option) {
  std::string why;
  int data_axes = 0;
  std::stringstream ss(spec);
  std::string item;
  while (why.empty() && std::getline(ss, item, ',')) {
    std::string name = item.substr(0, item.find('='));
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    std::string lower = name;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name == "data") {
      ++data_axes;
    } else if (edit_distance(lower, "data") <= 1) {
      // Any other name splits the grid: a misspelt batch axis would do so silently.
      why = "mesh axis '" + name +
            "' is not 'data' (the batch axis) but would split the grid "
            "as a domain axis; did you mean 'data'?";
    }
  }
  if (why.empty() && data_axes > 1) why = "more than one 'data' axis";
  try {
    collective_check(comm, why.empty(), why);
    return Mesh::parse(comm, spec);
  } catch (const Error& e) {
    int size = 0;
    MPI_Comm_size(comm, &size);
    fail(option + " = " + quote(spec) + " does not fit " + std::to_string(size) +
         " ranks: " + e.what());
  }
}

Mesh make_mesh(MPI_Comm comm, const TrainConfig& c) {
  return make_mesh(comm, c.mesh.shape, "mesh.shape");
}

}  // namespace tessera::app
