#include "apps/prep/args.hpp"

#include <sstream>

#include "decomp/error.hpp"

namespace tessera::prep {

Args::Args(const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs)
    : specs_(specs) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      pos_.push_back(a);
      continue;
    }
    std::string key = a.substr(2), value;
    const auto eq = key.find('=');
    bool has_value = false;
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    const OptionSpec* s = spec(key);
    if (!s) throw Error("unknown option --" + key + " (see --help)");
    if (s->value.empty()) {
      if (has_value) throw Error("option --" + key + " takes no value");
    } else if (!has_value) {
      if (i + 1 >= argv.size()) throw Error("option --" + key + " needs a value " + s->value);
      value = argv[++i];
    }
    kv_.emplace_back(key, value);
  }
}

const OptionSpec* Args::spec(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

bool Args::has(const std::string& name) const {
  for (const auto& [k, v] : kv_)
    if (k == name) return true;
  return false;
}

std::string Args::str(const std::string& name) const {
  for (auto it = kv_.rbegin(); it != kv_.rend(); ++it)
    if (it->first == name) return it->second;
  const OptionSpec* s = spec(name);
  if (s && !s->fallback.empty()) return s->fallback;
  throw Error("missing option --" + name + (s ? " " + s->value : std::string()));
}

double Args::num(const std::string& name) const {
  const std::string v = str(name);
  try {
    std::size_t used = 0;
    const double d = std::stod(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  throw Error("option --" + name + " " + v + " is not a number");
}

Index Args::integer(const std::string& name) const {
  const std::string v = str(name);
  try {
    std::size_t used = 0;
    const long long d = std::stoll(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  throw Error("option --" + name + " " + v + " is not an integer");
}

std::vector<Index> parse_shape(const std::string& text, const std::string& what) {
  std::vector<Index> out;
  std::string cur;
  auto flush = [&] {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(cur, &used);
      if (used != cur.size() || v < 0) throw Error("");
      out.push_back(v);
    } catch (const std::exception&) {
      throw Error(what + " '" + text + "' is not a shape like 64x64 or 4,1,64,64");
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

std::vector<std::string> Args::list(const std::string& name) const {
  std::vector<std::string> out;
  std::stringstream ss(str(name));
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

std::vector<double> Args::numbers(const std::string& name) const {
  std::vector<double> out;
  for (const std::string& s : list(name)) {
    try {
      out.push_back(std::stod(s));
    } catch (const std::exception&) {
      throw Error("option --" + name + ": '" + s + "' is not a number");
    }
  }
  return out;
}

std::string help_text(const std::string& usage, const std::string& description,
                      const std::vector<OptionSpec>& specs) {
  std::ostringstream os;
  os << "usage: " << usage << "\n\n" << description << "\n";
  if (!specs.empty()) os << "\noptions:\n";
  for (const auto& s : specs) {
    std::string left = "  --" + s.name + (s.value.empty() ? "" : " " + s.value);
    if (left.size() < 26) left += std::string(26 - left.size(), ' ');
    os << left << " " << s.help;
    if (!s.fallback.empty()) os << " (default " << s.fallback << ")";
    os << "\n";
  }
  os << "  --help" << std::string(20, ' ') << " this text\n";
  return os.str();
}

}  // namespace tessera::prep
