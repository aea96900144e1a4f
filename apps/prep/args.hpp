#pragma once
// A small argument parser for tessera-prep subcommands: positionals, `--key value`,
// `--key=value` and flags, each subcommand declaring its options (unknown ones are
// errors), and --help built from the declarations.
#include <string>
#include <vector>

#include "decomp/box.hpp"

namespace tessera::prep {

struct OptionSpec {
  std::string name;   // without "--"
  std::string value;  // placeholder ("N", "FILE"); empty: a flag
  std::string help;
  std::string fallback;  // default shown in --help ("" : none)
};

class Args {
 public:
  // Throws tessera::Error on unknown options and missing values.
  Args(const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs);
  bool help() const { return help_; }
  const std::vector<std::string>& positional() const { return pos_; }
  bool has(const std::string& name) const;
  bool flag(const std::string& name) const { return has(name); }
  // The value, the declared default, or an error naming the option when neither exists.
  std::string str(const std::string& name) const;
  double num(const std::string& name) const;
  Index integer(const std::string& name) const;
  // "256x256" or "4,1,64,64" -> {256, 256} / {4, 1, 64, 64}
  std::vector<Index> shape(const std::string& name) const;
  std::vector<double> numbers(const std::string& name) const;    // "0.1,0.2"
  std::vector<std::string> list(const std::string& name) const;  // "a,b,c"

 private:
  const OptionSpec* spec(const std::string& name) const;
  std::vector<OptionSpec> specs_;
  std::vector<std::pair<std::string, std::string>> kv_;
  std::vector<std::string> pos_;
  bool help_ = false;
};

std::vector<Index> parse_shape(const std::string& text, const std::string& what);
// The --help text: usage line, description, then one line per option.
std::string help_text(const std::string& usage, const std::string& description,
                      const std::vector<OptionSpec>& specs);

}  // namespace tessera::prep
