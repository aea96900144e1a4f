// The apps' one command-line parser: values with `=` and with a space, flags,
// positionals, defaults, the errors (unknown option, missing value, not a number), the
// --help text built from the declarations, and tessera-train's dotted config overrides
// passing through untouched.
#include <catch2/catch.hpp>

#include "apps/common/cli.hpp"
#include "decomp/error.hpp"
#include "tests/support/expect_error.hpp"

using namespace tessera;
using namespace tessera::cli;

namespace {

const std::vector<Option> kOptions = {{"out", "FILE", "output file", ""},
                                      {"samples", "N", "number of samples", "4"},
                                      {"sigma", "X", "standard deviation", "1.5"},
                                      {"grid", "NxN", "grid", ""},
                                      {"quiet", "", "no progress output", ""}};

Args parse(const std::vector<std::string>& argv, Overrides o = Overrides::Reject) {
  return Args(argv, kOptions, o);
}

}  // namespace

TEST_CASE("cli: values with = and with a space, flags and positionals", "[cli]") {
  const Args a = parse({"in.raw", "--out=a.h5", "--samples", "7", "--quiet", "more.raw"});
  CHECK(a.str("out") == "a.h5");
  CHECK(a.integer("samples") == 7);
  CHECK(a.flag("quiet"));
  CHECK(!a.has("grid"));
  CHECK(a.positional() == std::vector<std::string>{"in.raw", "more.raw"});
  CHECK(!a.help());
  // An option given twice is refused (which one was meant?), unless the command lets the
  // last one count (tessera-bench: scripts add theirs after the user's); `--` ends the
  // options; an `=` value may itself hold `=`.
  CHECK(test::error_of([] {
          parse({"--out", "x", "--out=y"});
        }) == "option --out is given twice ('x', then 'y'): give it once");
  CHECK(test::error_of([] {
          parse({"--quiet", "--quiet"});
        }) == "option --quiet is given twice: give it once");
  CHECK(
      Args({"--out", "x", "--out=y"}, kOptions, Overrides::Reject, Repeats::LastWins).str("out") ==
      "y");
  CHECK(parse({"--", "--out"}).positional() == std::vector<std::string>{"--out"});
  CHECK(parse({"--out=k=v"}).str("out") == "k=v");
  CHECK(parse({"--grid", "16x12"}).shape("grid") == std::vector<Index>{16, 12});
}

TEST_CASE("cli: defaults, and options with neither value nor default", "[cli]") {
  const Args a = parse({});
  CHECK(a.integer("samples") == 4);
  CHECK(a.num("sigma") == 1.5);
  CHECK(!a.has("samples"));
  CHECK(!a.flag("quiet"));
  CHECK(test::error_of([&] { a.str("out"); }) == "missing option --out FILE (see --help)");
}

TEST_CASE("cli: errors name the option", "[cli]") {
  const auto err = [](const std::vector<std::string>& argv) {
    return test::error_of([&] { parse(argv); });
  };
  CHECK(err({"--bogus", "1"}) ==
        "unknown option '--bogus' (options: --out, --samples, --sigma, --grid, --quiet, --help)");
  CHECK(test::has(err({"--bogus=1"}), "unknown option '--bogus' ("));
  CHECK(test::has(err({"-x"}), "unknown option '-x' ("));
  CHECK(err({"--out"}) == "option --out needs a value FILE");
  CHECK(err({"--out", "--quiet"}) == "option --out needs a value FILE");
  CHECK(err({"--quiet=yes"}) == "option --quiet takes no value");
  CHECK(test::error_of([] { parse({"--samples=many"}).integer("samples"); }) ==
        "option --samples many is not an integer");
  CHECK(test::error_of([] { parse({"--samples=2.5"}).integer("samples"); }) ==
        "option --samples 2.5 is not an integer");
  CHECK(test::error_of([] {
          parse({"--sigma", "1e"}).num("sigma");
        }) == "option --sigma 1e is not a number");
  // A subnormal is a number; an overflow and trailing characters are not.
  CHECK(parse({"--sigma", "1e-320"}).num("sigma") == 1e-320);
  CHECK(test::error_of([] {
          parse({"--sigma", "1e999"}).num("sigma");
        }) == "option --sigma 1e999 is out of the range of a double");
  const std::vector<Option> spacing = {{"spacing", "X,Y", "per dim", "1,1"}};
  CHECK(Args({"--spacing=1e-320,2"}, spacing).numbers("spacing") == std::vector<double>{1e-320, 2});
  CHECK(test::error_of([&] { Args({"--spacing=1.5abc,2"}, spacing).numbers("spacing"); }) ==
        "option --spacing: '1.5abc' is not a number");
  CHECK(test::has(test::error_of([] { parse({"--grid=16y4"}).shape("grid"); }),
                  "--grid '16y4' is not a shape"));
  // A list of choices: every item must be one of them (a typo is not a skipped row).
  const std::vector<Option> rows = {{"which", "LIST", "rows", "3d,2d"}};
  CHECK(Args({"--which=2d,fno"}, rows).choices("which", {"3d", "2d", "fno"}) ==
        std::set<std::string>{"2d", "fno"});
  CHECK(Args({}, rows).choices("which", {"3d", "2d"}) == std::set<std::string>{"3d", "2d"});
  CHECK(test::error_of([&] {
          Args({"--which=2d,3D"}, rows).choices("which", {"3d", "2d"});
        }) == "option --which: '3D' is not one of 3d, 2d");
  CHECK(test::error_of([&] {
          Args({"--which="}, rows).choices("which", {"3d", "2d"});
        }) == "option --which: empty list");
  // An empty item anywhere, a trailing one too (`--variables a,` is not `a`).
  CHECK(test::error_of([&] { Args({"--which=2d,"}, rows).list("which"); }) ==
        "option --which '2d,': an empty item (between, before or after ',')");
  CHECK(test::has(test::error_of([&] { Args({"--which=2d,,3d"}, rows).list("which"); }),
                  "an empty item"));
  // Dotted overrides are unknown options unless the command lets them through.
  CHECK(test::has(err({"--train.lr=0.1"}), "unknown option '--train.lr'"));
}

TEST_CASE("cli: --help, and its text from the declarations", "[cli]") {
  CHECK(parse({"--help"}).help());
  CHECK(parse({"in.raw", "-h"}).help());
  const std::string text = help_text("prog FILE [options]", "Does a thing.", kOptions);
  CHECK(text.rfind("usage: prog FILE [options]\n\nDoes a thing.\n\noptions:\n", 0) == 0);
  // One line per option, the help texts in one column.
  CHECK(test::has(text, "\n  --out FILE               output file\n"));
  CHECK(test::has(text, "\n  --samples N              number of samples (default 4)\n"));
  CHECK(test::has(text, "\n  --quiet                  no progress output\n"));
  CHECK(test::has(text, "\n  --help                   this text\n"));
}

TEST_CASE("cli: config overrides pass through in order", "[cli]") {
  const Args a = parse({"run.toml", "--train.lr=0.1", "--quiet", "--mesh.shape=domain=2,data=2",
                        "--out", "o.h5", "--data.path="},
                       Overrides::Accept);
  CHECK(a.overrides() ==
        std::vector<std::string>{"train.lr=0.1", "mesh.shape=domain=2,data=2", "data.path="});
  CHECK(a.positional() == std::vector<std::string>{"run.toml"});
  CHECK(a.str("out") == "o.h5");
  CHECK(a.flag("quiet"));
  // An override needs its `=`; undotted unknown options stay errors.
  const auto err = [](const std::vector<std::string>& argv) {
    return test::error_of([&] { parse(argv, Overrides::Accept); });
  };
  CHECK(err({"--optim.lr", "0.1"}) ==
        "unknown option '--optim.lr' (a config override is --optim.lr=VALUE; options: --out, "
        "--samples, --sigma, --grid, --quiet, --help, --section.key=value)");
  CHECK(test::has(err({"--verbose"}), "unknown option '--verbose' ("));
  CHECK(test::has(err({"--lr=0.1"}), "unknown option '--lr' ("));
}
