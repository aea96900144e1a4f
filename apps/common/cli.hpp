#pragma once
// The one command-line parser of the apps. A command declares its options; arguments are
// `--key value`, `--key=value`, flags (`--quiet`) and positionals; `--` ends the options.
// Unknown options are errors naming the option, and --help text is built from the same
// declarations, so the two cannot drift apart. tessera-train also passes dotted
// `--section.key=value` arguments through to its TOML config, which checks them itself.
#include <set>
#include <string>
#include <vector>

#include "decomp/index.hpp"

namespace tessera::cli {

struct Option {
  std::string name;      // without "--"
  std::string value;     // placeholder ("N", "FILE"); empty: a flag
  std::string help;      // one line for --help
  std::string fallback;  // default value, also shown in --help ("": none)
};

// Whether undeclared `--section.key=value` arguments are config overrides or unknown.
enum class Overrides { Reject, Accept };
// Whether a declared option given twice is an error (a typo or a pasted line: which one the
// user meant is unknown) or the last one counts (scripts that add their own after the
// user's, as scripts/bench.sh does).
enum class Repeats { Reject, LastWins };

class Args {
 public:
  // Throws tessera::Error on unknown options, missing values and values given to flags.
  Args(const std::vector<std::string>& argv, const std::vector<Option>& options,
       Overrides overrides = Overrides::Reject, Repeats repeats = Repeats::Reject);
  bool help() const { return help_; }  // --help or -h was given
  const std::vector<std::string>& positional() const { return positional_; }
  // "section.key=value" without the leading "--", in command-line order.
  const std::vector<std::string>& overrides() const { return overrides_; }
  bool has(const std::string& name) const;
  bool flag(const std::string& name) const { return has(name); }
  // The last value given, the declared default, or an error naming the option.
  std::string str(const std::string& name) const;
  double num(const std::string& name) const;
  // A finite number above lo (or at lo when `lo_allowed`): NaN, Inf and the rest refused.
  double finite_above(const std::string& name, double lo, bool lo_allowed = false) const;
  Index integer(const std::string& name) const;
  // The same, refused outside [lo, hi] (before any narrowing cast can wrap it).
  Index integer_in(const std::string& name, Index lo, Index hi) const;
  // "256x256" or "4,1,64,64" -> {256, 256} / {4, 1, 64, 64}
  std::vector<Index> shape(const std::string& name) const;
  // A shape to match: -1 stands for any extent.
  std::vector<Index> shape_pattern(const std::string& name) const;
  std::vector<double> numbers(const std::string& name) const;    // "0.1,0.2"
  std::vector<std::string> list(const std::string& name) const;  // "a,b,c"
  // A list whose items must come from `allowed` (an unknown or empty item is an error naming
  // the choices, not a silently skipped row).
  std::set<std::string> choices(const std::string& name,
                                const std::vector<std::string>& allowed) const;

 private:
  const Option* option(const std::string& name) const;
  std::vector<Option> options_;
  std::vector<std::pair<std::string, std::string>> values_;  // in command-line order
  std::vector<std::string> positional_, overrides_;
  bool help_ = false;
};

// "64x64" or "4,1,64,64" as extents; what names the source in the error.
std::vector<Index> parse_shape(const std::string& text, const std::string& what,
                               bool wildcard = false);  // wildcard: -1 allowed
// The --help text: usage line, description, then one line per option and --help.
std::string help_text(const std::string& usage, const std::string& description,
                      const std::vector<Option>& options);

}  // namespace tessera::cli
