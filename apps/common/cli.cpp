#include "apps/common/cli.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <cmath>
#include <sstream>

#include "decomp/error.hpp"

namespace tessera::cli {
namespace {

// Lists what the command takes, so a typo is answered with the right spelling nearby.
[[noreturn]] void unknown(const std::string& arg, const std::string& hint,
                          const std::vector<Option>& options, Overrides overrides) {
  std::string known;
  for (const auto& o : options) known += "--" + o.name + ", ";
  known += "--help";
  if (overrides == Overrides::Accept) known += ", --section.key=value";
  throw Error("unknown option '" + arg + "' (" + (hint.empty() ? "" : hint + "; ") +
              "options: " + known + ")");
}

bool is_option(const std::string& a) {
  return a.size() > 2 && a.rfind("--", 0) == 0;
}

}  // namespace

Args::Args(const std::vector<std::string>& argv, const std::vector<Option>& options,
           Overrides overrides, Repeats repeats)
    : options_(options) {
  bool options_ended = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (options_ended || a.empty() || a[0] != '-' || a == "-") {  // "-": stdin, by custom
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      options_ended = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (!is_option(a)) unknown(a, "", options_, overrides);
    std::string key = a.substr(2), value;
    const auto eq = key.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    const Option* o = option(key);
    if (!o) {
      const bool dotted = key.find('.') != std::string::npos;
      if (overrides == Overrides::Accept && dotted && has_value) {
        overrides_.push_back(a.substr(2));
        continue;
      }
      const std::string hint = overrides == Overrides::Accept && dotted
                                   ? "a config override is --" + key + "=VALUE"
                                   : "";
      unknown("--" + key, hint, options_, overrides);
    }
    if (o->value.empty()) {
      if (has_value) throw Error("option --" + key + " takes no value");
    } else if (!has_value) {
      // A following option is not taken for the value: `--out --quiet` lacks the file.
      if (i + 1 >= argv.size() || is_option(argv[i + 1]))
        throw Error("option --" + key + " needs a value " + o->value);
      value = argv[++i];
    }
    if (repeats == Repeats::Reject && has(key))
      throw Error(
          "option --" + key + " is given twice" +
          (o->value.empty() ? std::string() : " ('" + str(key) + "', then '" + value + "')") +
          ": give it once");
    values_.emplace_back(key, value);
  }
}

const Option* Args::option(const std::string& name) const {
  for (const auto& o : options_)
    if (o.name == name) return &o;
  return nullptr;
}

bool Args::has(const std::string& name) const {
  for (const auto& [k, v] : values_)
    if (k == name) return true;
  return false;
}

std::string Args::str(const std::string& name) const {
  for (auto it = values_.rbegin(); it != values_.rend(); ++it)
    if (it->first == name) return it->second;
  const Option* o = option(name);
  if (o && !o->fallback.empty()) return o->fallback;
  throw Error("missing option --" + name + (o ? " " + o->value : std::string()) + " (see --help)");
}

namespace {
// The number `s` spells whole, or why not: std::stod called a subnormal such as 1e-320 "not
// a number" (it throws on any ERANGE) and took "1.5abc" as 1.5 where its caller did not
// check the characters used.
std::optional<double> parse_number(const std::string& s, std::string& why) {
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0]))) {
    why = "is not a number";
    return std::nullopt;
  }
  if (errno == ERANGE && std::isinf(d)) {
    why = "is out of the range of a double";
    return std::nullopt;
  }
  return d;  // an underflow keeps its subnormal (or zero) value
}
}  // namespace

double Args::num(const std::string& name) const {
  const std::string v = str(name);
  std::string why;
  if (const auto d = parse_number(v, why)) return *d;
  throw Error("option --" + name + " " + v + " " + why);
}

Index Args::integer(const std::string& name) const {
  const std::string v = str(name);
  try {
    std::size_t used = 0;
    const long long d = std::stoll(v, &used);
    if (used == v.size()) return d;
  } catch (const std::out_of_range&) {  // digits, past 64 bits
    throw Error("option --" + name + " " + v + " is out of range (a 64-bit signed integer)");
  } catch (const std::exception&) {
  }
  throw Error("option --" + name + " " + v + " is not an integer");
}

double Args::finite_above(const std::string& name, double lo, bool lo_allowed) const {
  const double v = num(name);
  if (!std::isfinite(v) || v < lo || (v == lo && !lo_allowed)) {
    std::ostringstream os;
    os << "option --" << name << " " << str(name) << ": must be a finite number "
       << (lo_allowed ? ">= " : "> ") << lo;
    throw Error(os.str());
  }
  return v;
}

Index Args::integer_in(const std::string& name, Index lo, Index hi) const {
  const Index v = integer(name);
  if (v < lo || v > hi)
    throw Error("option --" + name + " " + std::to_string(v) + ": must lie in [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::vector<Index> parse_shape(const std::string& text, const std::string& what, bool wildcard) {
  std::vector<Index> out;
  std::string cur;
  auto flush = [&] {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(cur, &used);
      if (used != cur.size() || (v < 0 && !(wildcard && v == -1))) throw Error("");
      out.push_back(v);
    } catch (const std::exception&) {
      throw Error(what + " '" + text + "' is not a shape like 64x64 or 4,1,64,64" +
                  (wildcard ? " (-1: any extent)" : ""));
    }
    cur.clear();
  };
  for (char c : text) {
    if (c == 'x' || c == ',')
      flush();
    else
      cur += c;
  }
  flush();
  return out;
}

std::vector<Index> Args::shape(const std::string& name) const {
  return parse_shape(str(name), "--" + name);
}

std::vector<Index> Args::shape_pattern(const std::string& name) const {
  return parse_shape(str(name), "--" + name, true);
}

std::vector<std::string> Args::list(const std::string& name) const {
  std::vector<std::string> out;
  const std::string v = str(name);
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  // getline yields nothing after a last ',': "a," is refused as ",a" is, not read as "a".
  if (!v.empty() && v.back() == ',') out.push_back("");
  for (const std::string& item : out)
    if (item.empty())
      throw Error("option --" + name + " '" + v +
                  "': an empty item (between, before or after ',')");
  return out;
}

std::set<std::string> Args::choices(const std::string& name,
                                    const std::vector<std::string>& allowed) const {
  std::set<std::string> out;
  for (const std::string& item : list(name)) {
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
      std::string names;
      for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
      throw Error("option --" + name + ": '" + item + "' is not one of " + names);
    }
    out.insert(item);
  }
  if (out.empty()) throw Error("option --" + name + ": empty list");
  return out;
}

std::vector<double> Args::numbers(const std::string& name) const {
  std::vector<double> out;
  for (const std::string& s : list(name)) {
    std::string why;
    const auto d = parse_number(s, why);
    if (!d) throw Error("option --" + name + ": '" + s + "' " + why);
    out.push_back(*d);
  }
  return out;
}

std::string help_text(const std::string& usage, const std::string& description,
                      const std::vector<Option>& options) {
  constexpr std::size_t kColumn = 26;
  auto line = [&](std::string left, const std::string& help) {
    if (left.size() < kColumn) left += std::string(kColumn - left.size(), ' ');
    return left + " " + help;
  };
  std::ostringstream os;
  os << "usage: " << usage << "\n\n" << description << "\n\noptions:\n";
  for (const auto& o : options) {
    os << line("  --" + o.name + (o.value.empty() ? "" : " " + o.value), o.help);
    if (!o.fallback.empty()) os << " (default " << o.fallback << ")";
    os << "\n";
  }
  os << line("  --help", "this text") << "\n";
  return os.str();
}

}  // namespace tessera::cli
