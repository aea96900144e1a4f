// tessera-train's config: defaults, file values, command-line overrides, the printed
// config parsing back to itself, and one test per error (unknown section/key, wrong
// type, out of range, bad choice, syntax, missing file, bad flags, incomplete config,
// a mesh that does not fit the rank count) - errors name the key and are collective.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "apps/common/builders.hpp"
#include "apps/common/config.hpp"
#include "apps/common/trainer.hpp"
#include "runtime/train/unet.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"

using namespace tessera;
using namespace tessera::app;

namespace {

TrainConfig parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_config(text, overrides, "test.toml");
}

const char* kFull = R"(
[mesh]
shape = "domain=auto"

[data]
path = "darcy \"64\".h5"
inputs = ["a", "mask"]
targets = ["u"]
normalize = false

[model]
width = 8
depth = 2
norm = "none"

[optim]
name = "sgd"
lr = 1e-2
momentum = 0.5
nesterov = true
grad_clip = 1

[schedule]
type = "cosine"
warmup_steps = 10

[train]
steps = 200
batch_size = 4
loss = "mse"
metrics_csv = "out/metrics.csv"
seed = 7
)";

}  // namespace

TEST_CASE("config: defaults, file values and overrides", "[config]") {
  const TrainConfig d = parse("");
  const TrainConfig ref;
  MPI_CHECK(d.mesh.shape == "auto");
  MPI_CHECK(d.optim.lr == ref.optim.lr);
  MPI_CHECK(d.train.loss == "rel_l2");
  MPI_CHECK(d.data.inputs == (std::vector<std::string>{"a"}));

  const TrainConfig c = parse(kFull);
  MPI_CHECK(c.mesh.shape == "domain=auto");
  MPI_CHECK(c.data.path == "darcy \"64\".h5");
  MPI_CHECK(c.data.inputs == (std::vector<std::string>{"a", "mask"}));
  MPI_CHECK(!c.data.normalize);
  MPI_CHECK(c.model.width == 8);
  MPI_CHECK(c.model.norm == "none");
  MPI_CHECK(c.optim.name == "sgd");
  MPI_CHECK(c.optim.lr == 1e-2);
  MPI_CHECK(c.optim.grad_clip == 1.0);  // an integer is a fine float
  MPI_CHECK(c.optim.nesterov);
  MPI_CHECK(c.schedule.type == "cosine");
  MPI_CHECK(c.train.steps == 200);
  MPI_CHECK(c.train.metrics_csv == "out/metrics.csv");
  MPI_CHECK(c.model.depth == 2);
  MPI_CHECK(c.model.kernel_size == 3);  // untouched default

  const TrainConfig o =
      parse(kFull, {"optim.lr=0.25", "train.steps=5", "optim.lr=0.5", "data.inputs=x,y,z",
                    "data.targets=[\"p\", \"q\"]", "data.normalize=true",
                    "mesh.shape=domain=2,data=2", "train.metrics_csv="});
  MPI_CHECK(o.optim.lr == 0.5);  // the last override wins
  MPI_CHECK(o.train.steps == 5);
  MPI_CHECK(o.data.inputs == (std::vector<std::string>{"x", "y", "z"}));
  MPI_CHECK(o.data.targets == (std::vector<std::string>{"p", "q"}));
  MPI_CHECK(o.data.normalize);
  MPI_CHECK(o.mesh.shape == "domain=2,data=2");  // '=' inside a value is kept
  MPI_CHECK(o.train.metrics_csv.empty());
}

TEST_CASE("config: --print-config output parses back to the same config", "[config]") {
  const TrainConfig c = parse(kFull, {"optim.lr=0.1", "optim.eps=1e-12",
                                      "train.validation_split=0.3", "data.path=we\\ird\tname"});
  const std::string text = to_toml(c);
  const TrainConfig back = parse(text);
  MPI_CHECK(to_toml(back) == text);
  MPI_CHECK(back.optim.lr == 0.1);
  MPI_CHECK(back.optim.eps == 1e-12);
  MPI_CHECK(back.train.validation_split == 0.3);
  MPI_CHECK(back.data.path == "we\\ird\tname");
  // Every key of the schema is printed, and documented in --help.
  const std::string help = usage("tessera-train");
  for (const char* key :
       {"shape", "path", "inputs", "width", "lr", "beta2", "warmup_steps", "checkpoint_interval",
        "validation_split", "resume", "metrics_csv", "seed"}) {
    MPI_CHECK(text.find(std::string("\n") + key + " = ") != std::string::npos);
    MPI_CHECK(help.find(std::string(".") + key + "=") != std::string::npos);
  }
  MPI_CHECK(test::has(help, "--optim.lr=FLOAT"));
  MPI_CHECK(test::has(help, "one of sgd, adam, adamw"));
}

TEST_CASE("config: model keys the chosen model does not use are named", "[config]") {
  // kFull sets width, depth and norm for the default UNet: all used.
  MPI_CHECK(unused_model_keys(parse(kFull)).empty());
  // Keys of another model, set away from their defaults.
  const auto fno_keys = unused_model_keys(parse(kFull, {"model.modes=[8,4]", "model.heads=3"}));
  MPI_REQUIRE(fno_keys.size() == 2);
  MPI_CHECK(test::has(fno_keys[0],
                      "model.modes = [8, 4] is not used by model.type = \"unet\" "
                      "(only by fno)"));
  MPI_CHECK(test::has(fno_keys[1], "model.heads = 3 is not used by model.type = \"unet\""));
  // The window, set with global attention.
  const auto vit = unused_model_keys(parse("[model]\ntype = \"vit\"\nwindow = 9\n"));
  MPI_REQUIRE(vit.size() == 1);
  MPI_CHECK(test::has(vit[0], "model.window = 9 is not used with model.attention = \"auto\""));
  MPI_CHECK(unused_model_keys(parse("[model]\ntype = \"vit\"\nwindow = 9\n"
                                    "attention = \"neighbourhood\"\n"))
                .empty());
  // GroupNorm's groups, set with another norm.
  const auto groups = unused_model_keys(parse("[model]\ngroups = 2\nnorm = \"batch\"\n"));
  MPI_REQUIRE(groups.size() == 1);
  MPI_CHECK(test::has(groups[0], "model.groups = 2 is not used with model.norm = \"batch\""));
  MPI_CHECK(unused_model_keys(parse("[model]\ngroups = 2\n")).empty());
  // A printed config read back names nothing: keys at their defaults are not warned of.
  MPI_CHECK(unused_model_keys(parse(to_toml(parse("[model]\ntype = \"fno\"\n")))).empty());
}

TEST_CASE("config: model.modes is one value for every dim or one per dim", "[config]") {
  MPI_CHECK(parse("").model.modes == std::vector<std::int64_t>{12});
  MPI_CHECK(parse("[model]\nmodes = 8\n").model.modes == std::vector<std::int64_t>{8});
  MPI_CHECK(parse("[model]\nmodes = [16, 8]\n").model.modes == (std::vector<std::int64_t>{16, 8}));
  MPI_CHECK(parse("", {"model.modes=5,3,2"}).model.modes == (std::vector<std::int64_t>{5, 3, 2}));
  MPI_CHECK(parse("", {"model.modes=[4, 6]"}).model.modes == (std::vector<std::int64_t>{4, 6}));
  MPI_CHECK(parse("", {"model.modes=7"}).model.modes == std::vector<std::int64_t>{7});
  // Printed as it was given (one value stays an integer), and parsed back.
  MPI_CHECK(test::has(to_toml(parse("", {"model.modes=4,6"})), "\nmodes = [4, 6]\n"));
  MPI_CHECK(test::has(to_toml(parse("")), "\nmodes = 12\n"));
  MPI_CHECK(parse(to_toml(parse("", {"model.modes=4,6"}))).model.modes ==
            (std::vector<std::int64_t>{4, 6}));
  MPI_CHECK_ERROR(parse("[model]\nmodes = []\n"),
                  "model.modes is an empty array: give one value, or one per dim");
  MPI_CHECK_ERROR(parse("[[model]]\nwidth = 8\n"),
                  "is an array of tables; a section is written [model]");
  MPI_CHECK_ERROR(parse("", {"model.depth=4294967297"}),
                  "model.depth = 4294967297 is out of range: must be [1, 64]");
  MPI_CHECK_ERROR(parse("", {"model.layers=100000000"}),
                  "model.layers = 100000000 is out of range: must be [1, 64]");
  MPI_CHECK_ERROR(parse("[model]\nmodes = [4, 1.5]\n"), "but an element is a float");
  MPI_CHECK_ERROR(parse("[model]\nmodes = \"4\"\n"), "got a string");
  MPI_CHECK_ERROR(parse("[model]\nmodes = [6, 0]\n"),
                  "model.modes = [6, 0] is out of range: each value must be >= 1");
  MPI_CHECK_ERROR(parse("", {"model.modes=0"}), "model.modes = 0 is out of range: must be >= 1");
  MPI_CHECK_ERROR(parse("", {"model.modes=4,x"}), "got '4,x' in --model.modes=4,x");
  MPI_CHECK_ERROR(parse("", {"model.modes=4,"}), "got '4,' in --model.modes=4,");
  MPI_CHECK(test::has(usage("tessera-train"), "--model.modes=INT[,INT...]"));
}

TEST_CASE("config errors: unknown section and key, in file and on the command line", "[config]") {
  MPI_CHECK_ERROR(parse("[optimizer]\nlr = 1\n"), "unknown section [optimizer] at test.toml:1:");
  MPI_CHECK_ERROR(parse("[optim]\nlrr = 0.1\n"), "unknown key 'optim.lrr' at test.toml:2:1");
  MPI_CHECK_ERROR(parse("[optim]\nlrr = 0.1\n"), "did you mean 'optim.lr'?");
  MPI_CHECK_ERROR(parse("", {"optim.lrr=0.1"}), "unknown key 'optim.lrr' in --optim.lrr=0.1");
  MPI_CHECK_ERROR(parse("", {"optimizer.lr=0.1"}), "unknown section 'optimizer'");
  MPI_CHECK_ERROR(parse("", {"lr=0.1"}), "is not --section.key=value");
  MPI_CHECK_ERROR(parse("lr = 0.1\n"), "key 'lr' at test.toml:1:1 is outside any section");
  MPI_CHECK_ERROR(parse("[train]\nsteps = 1\n[train.sub]\nx = 1\n"), "unknown key 'train.sub'");
}

TEST_CASE("config errors: a field named twice in data.inputs or data.targets", "[config]") {
  MPI_CHECK_ERROR(parse("[data]\ninputs = [\"a\", \"b\", \"a\"]\n"), "data.inputs names 'a' twice");
  MPI_CHECK_ERROR(parse("", {"data.targets=u,u"}), "data.targets names 'u' twice");
  // A path would make tessera-infer write its prediction elsewhere in the file.
  MPI_CHECK_ERROR(parse("", {"data.targets=../evil/x"}),
                  "data.targets names '../evil/x': a field name, not a path");
  MPI_CHECK_ERROR(parse("[data]\ninputs = [\"..\"]\n"), "a field name, not a path");
}

TEST_CASE("checkpoint signatures: the difference names the words that differ", "[config]") {
  // A word holding spaces inside parentheses is one word; one word missing shifts nothing.
  MPI_CHECK(signature_difference("vit dim=8 positions=learned:(8, 8) depth=2",
                                 "vit dim=8 positions=learned:(12, 12) depth=2") ==
            "positions=learned:(8, 8), not positions=learned:(12, 12)");
  MPI_CHECK(
      signature_difference("vit dim=8 depth=2", "vit dim=8 positions=learned:(4, 4) depth=2") ==
      "positions=sinusoidal, not positions=learned:(4, 4)");
  MPI_CHECK(signature_difference("unet width=4", "unet width=4 padding=circular") ==
            "padding=zeros, not padding=circular");
  MPI_CHECK(signature_difference("unet width=4", "unet width=4 extra=1") ==
            "no extra, not extra=1");
  MPI_CHECK(signature_difference("fno width=4", "unet width=4") == "a fno, not a unet");
  // Older UNet signatures: norms by number, GroupNorm's groups written without GroupNorm.
  MPI_CHECK(current_unet_signature("unet nd=2 width=4 norm=1 groups=2 down=0 up=1 dtype=f32") ==
            "unet nd=2 width=4 norm=batch groups=0 down=pool up=transposed_conv dtype=f32");
  MPI_CHECK(current_unet_signature("unet nd=2 width=4 norm=none groups=12") ==
            "unet nd=2 width=4 norm=none groups=0");
  MPI_CHECK(current_unet_signature("unet nd=2 width=4 norm=group groups=2 up=upsample") ==
            "unet nd=2 width=4 norm=group groups=2 up=upsample");
  MPI_CHECK(current_unet_signature("vit dim=8 groups=2") == "vit dim=8 groups=2");
}

TEST_CASE("config errors: wrong types", "[config]") {
  MPI_CHECK_ERROR(parse("[optim]\nlr = \"fast\"\n"),
                  "optim.lr must be a number, got a string at test.toml:2:6");
  MPI_CHECK_ERROR(parse("[train]\nsteps = 1.5\n"), "train.steps must be an integer, got a float");
  MPI_CHECK_ERROR(parse("[train]\nresume = 1\n"),
                  "train.resume must be a boolean (true or false), got an integer");
  MPI_CHECK_ERROR(parse("[data]\ninputs = \"a\"\n"),
                  "data.inputs must be an array of strings, got a string");
  MPI_CHECK_ERROR(parse("[data]\ninputs = [\"a\", 2]\n"), "an element is an integer");
  MPI_CHECK_ERROR(parse("[mesh]\nshape = 4\n"), "mesh.shape must be a string, got an integer");
  MPI_CHECK_ERROR(parse("", {"train.steps=abc"}),
                  "train.steps must be an integer, got 'abc' in --train.steps=abc");
  MPI_CHECK_ERROR(parse("", {"train.steps=10x"}), "got '10x'");
  MPI_CHECK_ERROR(parse("", {"optim.lr=1e-3.5"}), "optim.lr must be a number");
  MPI_CHECK_ERROR(parse("", {"train.resume=maybe"}), "train.resume must be a boolean");
  MPI_CHECK_ERROR(parse("", {"data.inputs=[1, 2]"}), "data.inputs must be an array of strings");
  MPI_CHECK_ERROR(parse("", {"data.inputs=a,b,"}), "got 'a,b,' in --data.inputs=a,b,");
  MPI_CHECK_ERROR(parse("", {"data.inputs=a,,b"}), "got 'a,,b' in --data.inputs=a,,b");
  MPI_CHECK_ERROR(parse("", {"model.modes=4,,3"}), "got '4,,3' in --model.modes=4,,3");
  MPI_CHECK_ERROR(parse("", {"model.modes="}), "got '' in --model.modes=");
}

TEST_CASE("config errors: out of range, bad choices, inconsistent keys", "[config]") {
  MPI_CHECK_ERROR(parse("[optim]\nlr = 0\n"), "optim.lr = 0.0 is out of range: must be > 0");
  MPI_CHECK_ERROR(parse("[optim]\nbeta1 = 1.0\n"),
                  "optim.beta1 = 1.0 is out of range: must be [0.0, 1.0)");
  MPI_CHECK_ERROR(parse("", {"train.validation_split=-0.1"}),
                  "train.validation_split = -0.1 is out of range");
  MPI_CHECK_ERROR(parse("", {"train.batch_size=0"}),
                  "train.batch_size = 0 is out of range: must be >= 1");
  MPI_CHECK_ERROR(parse("", {"optim.lr=nan"}), "optim.lr = nan is not a finite number");
  MPI_CHECK_ERROR(parse("", {"optim.lr=inf"}), "optim.lr = inf is not a finite number");
  MPI_CHECK_ERROR(parse("", {"optim.grad_clip=inf"}), "optim.grad_clip = inf is not a finite");
  MPI_CHECK_ERROR(parse("", {"model.activation=tan"}),
                  "model.activation = \"tan\" is not one of gelu, relu, silu, tanh");
  MPI_CHECK(test::error_of([] { parse("", {"model.activation=tanh"}); }).empty());
  MPI_CHECK_ERROR(parse("", {"train.nonfinite=ignore"}),
                  "train.nonfinite = \"ignore\" is not one of stop, skip_step");
  MPI_CHECK_ERROR(parse("", {"train.max_skips=0"}), "train.max_skips = 0 is out of range");
  MPI_CHECK_ERROR(parse("", {"train.keep_checkpoints=-1"}),
                  "train.keep_checkpoints = -1 is out of range");
  MPI_CHECK_ERROR(parse("[optim]\nname = \"adam2\"\n"),
                  "optim.name = \"adam2\" is not one of sgd, adam, adamw");
  MPI_CHECK_ERROR(parse("", {"train.loss=l1"}), "train.loss = \"l1\" is not one of mse, rel_l2");
  MPI_CHECK_ERROR(parse("", {"model.type=vit", "model.patch=9223372036854775807"}),
                  "model.patch = 9223372036854775807 is out of range");
  MPI_CHECK_ERROR(parse("", {"model.type=vit", "model.attention=neighborhood"}),
                  "model.attention = \"neighborhood\" is not one of auto, ring, all_to_all, "
                  "all_gather, neighbourhood; did you mean \"neighbourhood\"?");
  MPI_CHECK_ERROR(parse("", {"train.steps=5", "train.epochs=2"}), "are both set");
  MPI_CHECK_ERROR(parse("", {"model.kernel_size=4"}), "model.kernel_size = 4 must be odd");
  MPI_CHECK_ERROR(parse("", {"model.width=10", "model.groups=4"}),
                  "model.groups = 4 does not divide model.width = 10");
  MPI_CHECK_ERROR(parse("", {"data.targets="}), "data.targets must name at least one field");
  MPI_CHECK_ERROR(check_complete(parse("", {"train.steps=3"})), "data.path is not set");
  MPI_CHECK_ERROR(check_complete(parse("", {"data.path=x.h5"})),
                  "train.steps and train.epochs are both 0 (unset)");
  MPI_CHECK(test::error_of([] { check_complete(parse(kFull)); }).empty());
}

TEST_CASE("config errors: syntax, files and command-line flags", "[config]") {
  MPI_CHECK_ERROR(parse("[optim]\nlr = = 3\n"), "config: test.toml:2:");
  MPI_CHECK_ERROR(load_config("/nonexistent/train.toml", {}),
                  "cannot open config file '/nonexistent/train.toml'");
  // A folder reads as an empty stream: it must not pass for an empty config.
  MPI_CHECK_ERROR(load_config("/tmp", {}), "config file '/tmp' is a directory");
  const CliArgs a = parse_cli({"run.toml", "--optim.lr=0.1", "--print-config", "--train.steps=3"});
  MPI_CHECK(a.config_path == "run.toml");
  MPI_CHECK(a.print_config);
  MPI_CHECK(!a.help);
  MPI_CHECK(a.overrides == (std::vector<std::string>{"optim.lr=0.1", "train.steps=3"}));
  MPI_CHECK(parse_cli({"-h"}).help);
  MPI_CHECK_ERROR(parse_cli({"--verbose"}), "unknown option '--verbose'");
  MPI_CHECK_ERROR(parse_cli({"--optim.lr", "0.1"}), "unknown option '--optim.lr'");
  MPI_CHECK_ERROR(parse_cli({"-x"}), "unknown option '-x'");
  MPI_CHECK_ERROR(parse_cli({"a.toml", "b.toml"}), "two config files given");
}

TEST_CASE("config: a file readable on some ranks only fails on every rank", "[config]") {
  int rank = 0, size = 1, pid = static_cast<int>(getpid());
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::string path = "/tmp/tessera_test_config_" + std::to_string(pid) + ".toml";
  if (rank == 0) std::ofstream(path) << kFull;
  MPI_Barrier(MPI_COMM_WORLD);
  CliArgs args;
  args.config_path = path;
  args.overrides = {"train.seed=3"};
  const TrainConfig c = load_config(MPI_COMM_WORLD, args);
  MPI_CHECK(c.train.seed == 3);
  MPI_CHECK(c.model.width == 8);
  // The last rank looks elsewhere: everyone fails, naming that rank's problem.
  if (rank == size - 1) args.config_path = path + ".missing";
  MPI_CHECK_ERROR(load_config(MPI_COMM_WORLD, args), "cannot open config file");
  if (size > 1)
    MPI_CHECK_ERROR(load_config(MPI_COMM_WORLD, args), "rank " + std::to_string(size - 1));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::remove(path.c_str());
}

TEST_CASE("config: mesh.shape against the rank count", "[config]") {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  TrainConfig c;
  const Mesh line = make_mesh(MPI_COMM_WORLD, c);  // auto: one domain axis
  MPI_CHECK(line.ndim() == 1);
  MPI_CHECK(line.dim(0) == size);
  c.mesh.shape = "domain=auto,data=1";
  const Mesh two = make_mesh(MPI_COMM_WORLD, c);
  MPI_CHECK((two.dims() == std::vector<int>{size, 1}));
  MPI_CHECK(two.names().back() == "data");

  c.mesh.shape = "domain=" + std::to_string(size + 1);
  MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c),
                  "mesh.shape = \"domain=" + std::to_string(size + 1) + "\" does not fit " +
                      std::to_string(size) + " ranks");
  MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c),
                  "does not match the " + std::to_string(size) + " ranks");
  c.mesh.shape = "domain=auto,data=" + std::to_string(size + 1);
  MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c), "not divisible by " + std::to_string(size + 1));
  c.mesh.shape = "domain=two";
  MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c), "has size 'two', not an integer");
  c.mesh.shape = "data=1,data=1,domain=auto";
  MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c), "more than one 'data' axis");
  // Spaces around names and sizes are dropped: still a batch axis, not a second grid axis.
  c.mesh.shape = " domain = auto , data = 1 ";
  const Mesh spaced = make_mesh(MPI_COMM_WORLD, c);
  MPI_CHECK((spaced.names() == std::vector<std::string>{"domain", "data"}));
  MPI_CHECK((spaced.dims() == std::vector<int>{size, 1}));
  // A misspelt batch axis would split the grid silently.
  for (const char* spelt : {"dta", "Data", "datas", "date"}) {
    c.mesh.shape = std::string("domain=auto,") + spelt + "=1";
    MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c),
                    std::string("mesh axis '") + spelt + "' is not 'data' (the batch axis)");
  }
  c.mesh.shape = "domain=auto,x-y=1";
  MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c), "mesh axis name 'x-y' is not a word");
  // Sizes whose product overflows an int: named, not a division by a wrapped product.
  c.mesh.shape = "domain=65536,data=65536,x=auto";
  MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c),
                  "not divisible by the product of the sizes given (past the int range)");
  c.mesh.shape = "domain=65536,y=65536";
  MPI_CHECK_ERROR(make_mesh(MPI_COMM_WORLD, c), "mesh of 4294967296 ranks (65536x65536)");
}

TEST_CASE("train.seed: every seed its own initialisation, small seeds as they were", "[config]") {
  MPI_CHECK(init_seed(0) == 0u);
  MPI_CHECK(init_seed(7) == 7u);
  MPI_CHECK(init_seed(4294967295) == 4294967295u);
  // A plain cast made seeds 2^32 apart alike (same weights, other batch order).
  const std::int64_t two32 = std::int64_t{1} << 32;
  std::vector<unsigned> seen;
  for (std::int64_t s : {std::int64_t{0}, two32, 2 * two32, 3 * two32 + 1, std::int64_t{1},
                         two32 + 1, std::int64_t{9223372036854775807}})
    seen.push_back(init_seed(s));
  std::sort(seen.begin(), seen.end());
  MPI_CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
}

TEST_CASE("config builds the optimizer, schedule, loss and dtype it names", "[config]") {
  auto one_step = [](const TrainConfig& c) {
    Parameter p{"w", Tensor::empty({3}, DType::f64), Tensor::empty({3}, DType::f64)};
    for (Index i = 0; i < 3; ++i)
      p.value.data<double>()[i] = 1.0 + i, p.grad.data<double>()[i] = 0.5 - i;
    auto opt = make_optimizer(c.optim, {{"w", &p}});
    opt->step();
    opt->step();
    return std::make_pair(opt->name(), p.value.clone());
  };
  auto direct = [](Optimizer&& opt, Parameter& p) {
    opt.step();
    opt.step();
    return p.value.clone();
  };
  for (const char* name : {"sgd", "adam", "adamw"}) {
    const TrainConfig c =
        parse(kFull, {std::string("optim.name=") + name, "optim.weight_decay=0.03",
                      "optim.beta2=0.95", "optim.momentum=0.7"});
    const auto [got_name, got] = one_step(c);
    MPI_CHECK(got_name == name);
    Parameter p{"w", Tensor::empty({3}, DType::f64), Tensor::empty({3}, DType::f64)};
    for (Index i = 0; i < 3; ++i)
      p.value.data<double>()[i] = 1.0 + i, p.grad.data<double>()[i] = 0.5 - i;
    const std::vector<NamedParameter> np = {{"w", &p}};
    const AdamOptions ao{1e-2, 0.9, 0.95, 1e-8, 0.03};
    const Tensor want = std::string(name) == "sgd"
                            ? direct(Sgd(np, SgdOptions{1e-2, 0.7, 0, 0.03, true}), p)
                        : std::string(name) == "adam" ? direct(Adam(np, ao), p)
                                                      : direct(AdamW(np, ao), p);
    bool same = true;
    for (Index i = 0; i < 3; ++i) same = same && got.data<double>()[i] == want.data<double>()[i];
    MPI_CHECK(same);
  }
  const TrainConfig c = parse(kFull, {"schedule.min_lr=0.001"});  // cosine, warm-up 10, lr 1e-2
  const LrSchedule s = make_schedule(c, 200);
  MPI_CHECK(s.kind == LrSchedule::Kind::Cosine);
  MPI_CHECK(s.lr(0) == 1e-3);  // warm-up: lr * 1 / 10
  MPI_CHECK(std::abs(s.lr(200) - 0.001) < 1e-15);
  MPI_CHECK_ERROR(make_schedule(parse(kFull, {"schedule.min_lr=0.5"}), 200), "exceeds optim.lr");
  MPI_CHECK(make_schedule(
                parse("", {"schedule.type=step", "schedule.step_size=5", "schedule.gamma=0.5"}), 0)
                .lr(5) == 0.5 * TrainConfig{}.optim.lr);
  MPI_CHECK(loss_kind(parse(kFull).train) == LossKind::Mse);
  MPI_CHECK(loss_kind(parse("").train) == LossKind::RelativeL2);
  MPI_CHECK(model_dtype(parse("").model) == DType::f32);
  MPI_CHECK(model_dtype(parse("", {"model.dtype=float64"}).model) == DType::f64);
}

TEST_CASE("sampler: batches are cut from the stream of epochs, every sample once per pass",
          "[config]") {
  // 5 samples in batches of 2, unshuffled: the third batch spans two epochs (the tail was
  // dropped, so sample 4 was never drawn).
  Sampler plain(5, 2, false, 1);
  std::vector<Index> drawn;
  for (int i = 0; i < 5; ++i)
    for (Index s : plain.next()) drawn.push_back(s);
  MPI_CHECK(drawn == std::vector<Index>({0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  // Shuffled, 7 samples in batches of 3: after 7 batches (3 passes) each sample 3 times,
  // and a state saved mid-epoch resumes the same stream.
  Sampler a(7, 3, true, 42);
  std::vector<int> count(7, 0);
  std::string saved;
  std::vector<std::vector<Index>> after;
  for (int i = 0; i < 7; ++i) {
    if (i == 2) saved = a.state();
    const std::vector<Index> b = a.next();
    if (i >= 2) after.push_back(b);
    for (Index s : b) ++count[static_cast<std::size_t>(s)];
  }
  MPI_CHECK(count == std::vector<int>(7, 3));
  Sampler b(7, 3, true, 7);
  b.load_state(saved);
  bool same = true;
  for (const auto& want : after) same = same && b.next() == want;
  MPI_CHECK(same);
  // No batch draws a sample twice where it spans two shuffled epochs (it did: the shuffle
  // may put the old epoch's last samples first), and every pass still draws each sample
  // once: many seeds and shapes, down to a batch of all samples but one.
  int repeated = 0, uneven = 0, spans = 0;
  for (Index n : {2, 3, 5, 7, 8}) {
    for (Index batch = 1; batch < n; ++batch) {
      for (std::uint64_t seed = 0; seed < 40; ++seed) {
        Sampler s(n, batch, true, seed);
        std::vector<int> seen(static_cast<std::size_t>(n), 0);
        for (Index step = 0; step < n; ++step) {  // n batches: exactly `batch` passes
          const std::int64_t epoch_before = s.epoch();
          std::vector<Index> drawn_now = s.next();
          spans += s.epoch() != epoch_before;
          std::vector<Index> sorted = drawn_now;
          std::sort(sorted.begin(), sorted.end());
          repeated += std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
          for (Index i : drawn_now) ++seen[static_cast<std::size_t>(i)];
        }
        uneven += seen != std::vector<int>(static_cast<std::size_t>(n), static_cast<int>(batch));
      }
    }
  }
  INFO(spans << " batches that began a new epoch");
  MPI_CHECK(spans > 1000);
  MPI_CHECK(repeated == 0);
  MPI_CHECK(uneven == 0);
}
