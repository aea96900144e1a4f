// tessera-prep validate's rules, one file per rule: a good field file passes, and a copy
// broken in exactly one way fails with that rule's message first (io/schema.hpp lists them).
#include <cmath>
#include <functional>
#include <limits>

#include "io/schema.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"

using namespace tessera;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// A valid file: /fields/u (2, 1, 4, 6) with its grid attributes, then `breakit` applied.
// Returns the problems validate finds (values not scanned: no data is written).
std::vector<std::string> problems_of(const std::function<void(io::File&)>& breakit,
                                     bool root = true) {
  const std::string path = test::temp_file(MPI_COMM_WORLD, "rules");
  std::vector<std::string> p;
  {
    io::File f = io::File::create(path, MPI_COMM_WORLD);
    if (root) io::schema::write_root(f, "test");
    f.create_dataset("/fields/u", {2, 1, 4, 6}, DType::f32);
    io::schema::GridMeta m;
    m.variables = {"u"};
    m.spacing = {0.25, 0.2};
    m.extent = {1.0, 1.0};
    io::schema::write_grid_meta(f, "/fields/u", m);
    breakit(f);
    p = io::schema::validate(f, {}, false);
  }
  test::remove_file(MPI_COMM_WORLD, path);
  return p;
}

// The first problem contains `part`.
bool first_is(const std::vector<std::string>& p, const std::string& part) {
  if (p.empty() || !test::has(p.front(), part)) {
    INFO((p.empty() ? std::string("no problem found") : "first problem: " + p.front()));
    return false;
  }
  return true;
}

void grid(io::File& f, const std::string& d, const std::vector<Index>& shape) {
  f.create_dataset(d, shape, DType::f32);
  io::schema::GridMeta m;
  m.variables = {"v"};
  m.spacing.assign(shape.size() - 2, 0.1);
  m.extent.assign(shape.size() - 2, 1.0);
  io::schema::write_grid_meta(f, d, m);
}

}  // namespace

TEST_CASE("schema: the good file passes", "[schema]") {
  MPI_CHECK(problems_of([](io::File&) {}).empty());
}

TEST_CASE("schema: root attributes", "[schema]") {
  MPI_CHECK(first_is(problems_of([](io::File&) {}, false),
                     "missing root attribute 'tessera_schema_version'"));
  MPI_CHECK(first_is(
      problems_of([](io::File& f) { f.set_attr("/", io::schema::kVersionAttr, std::int64_t{2}); }),
      "schema version 2"));
  MPI_CHECK(first_is(
      problems_of([](io::File& f) { f.set_attr("/", io::schema::kVersionAttr, std::string("1")); }),
      "is a string '1', not an integer"));
  MPI_CHECK(first_is(
      problems_of([](io::File& f) { f.set_attr("/", "generator", std::vector<double>{1}); }),
      "root attribute 'generator' must be a string"));
}

TEST_CASE("schema: datasets, types and shapes", "[schema]") {
  MPI_CHECK(first_is(problems_of([](io::File& f) { f.create_dataset("/other", {2}, DType::f32); }),
                     "dataset '/other'"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       grid(f, "/fields/g/w", {2, 1, 4, 6});
                     }),
                     "'/fields/g/w' in"));
  MPI_CHECK(problems_of([](io::File& f) { grid(f, "/fields/w", {2, 1, 4, 6}); }).empty());
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.create_dataset("/fields/w", {2, 1, 4, 6}, DType::f64);
                     }),
                     "holds float64, the schema wants float32"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.create_dataset("/fields/w", {2, 1}, DType::f32);
                     }),
                     "a field needs (N, C, spatial...) with 1 to 3 spatial dims"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.create_dataset("/fields/w", {2, 1, 2, 2, 2, 2}, DType::f32);
                     }),
                     "with 1 to 3 spatial dims"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       grid(f, "/fields/w", {0, 1, 4, 6});
                     }),
                     "holds 0 samples"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       grid(f, "/fields/w", {2, 1, 0, 5});
                     }),
                     "has shape (2, 1, 0, 5) with an empty dim"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       grid(f, "/fields/w", {3, 1, 4, 6});
                     }),
                     "datasets disagree on the sample count N"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.create_dataset(io::schema::kCoords, {2, 5, 2}, DType::f32);
                     }),
                     "expected (N, P, 3)"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.create_dataset(io::schema::kCoords, {2, 5, 3}, DType::f32);
                       f.create_dataset(io::schema::kFeatures, {2, 4, 1}, DType::f32);
                       f.set_attr(io::schema::kFeatures, "variables",
                                  std::vector<std::string>{"f"});
                     }),
                     "its (N, P) must match"));
}

TEST_CASE("schema: variables", "[schema]") {
  using V = std::vector<std::string>;
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.set_attr("/fields/u", "variables", V{"a", "b"});
                     }),
                     "attribute 'variables' has 2 entries, expected 1"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.set_attr("/fields/u", "variables", std::vector<double>{1});
                     }),
                     "attribute 'variables' must be strings"));
  MPI_CHECK(first_is(problems_of([](io::File& f) { f.set_attr("/fields/u", "variables", V{""}); }),
                     "attribute 'variables' has an empty name"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.create_dataset("/fields/w", {2, 2, 4, 6}, DType::f32);
                       io::schema::GridMeta m;
                       m.variables = {"p", "p"};
                       m.spacing = {0.1, 0.1};
                       m.extent = {1, 1};
                       io::schema::write_grid_meta(f, "/fields/w", m);
                     }),
                     "attribute 'variables' names 'p' twice"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.create_dataset("/fields/w", {2, 1, 4, 6}, DType::f32);
                     }),
                     "'/fields/w' in") &&
            first_is(problems_of([](io::File& f) {
                       f.create_dataset("/fields/w", {2, 1, 4, 6}, DType::f32);
                     }),
                     "missing attribute 'variables'"));
}

TEST_CASE("schema: grid attributes", "[schema]") {
  using D = std::vector<double>;
  MPI_CHECK(first_is(problems_of([](io::File& f) { f.set_attr("/fields/u", "spacing", D{0.25}); }),
                     "attribute 'spacing' has 1 entries, expected 2"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.set_attr("/fields/u", "spacing", D{-0.25, 0.2});
                     }),
                     "attribute 'spacing' entry 0 is -0.25, must be finite and > 0"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.set_attr("/fields/u", "spacing", D{0.25, kNaN});
                     }),
                     "attribute 'spacing' entry 1 is nan"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.set_attr("/fields/u", "extent", D{0, 1});
                     }),
                     "attribute 'extent' entry 0 is 0, must be finite and > 0"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.set_attr("/fields/u", "origin", D{0, kInf});
                     }),
                     "attribute 'origin' entry 1 is inf, must be finite"));
  MPI_CHECK(first_is(problems_of([](io::File& f) { f.set_attr("/fields/u", "origin", D{0}); }),
                     "attribute 'origin' has 1 entries, expected 2"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.set_attr("/fields/u", "spacing", D{0.25, 1.0});
                     }),
                     "spatial dim 1 has 6 nodes at spacing 1.000000, which span 5.000000, more "
                     "than its extent 1.000000"));
  MPI_CHECK(first_is(problems_of([](io::File& f) { f.set_attr("/fields/u", "units", D{1}); }),
                     "attribute 'units' is not part of the schema"));
}

TEST_CASE("schema: statistics attributes", "[schema]") {
  using D = std::vector<double>;
  const auto stats = [](double mean, double sd, double mn, double mx) {
    return [=](io::File& f) {
      f.set_attr("/fields/u", "mean", D{mean});
      f.set_attr("/fields/u", "std", D{sd});
      f.set_attr("/fields/u", "min", D{mn});
      f.set_attr("/fields/u", "max", D{mx});
    };
  };
  MPI_CHECK(problems_of(stats(0.5, 0.1, 0, 1)).empty());
  MPI_CHECK(first_is(problems_of([](io::File& f) { f.set_attr("/fields/u", "mean", D{0.5}); }),
                     "attributes mean, std, min and max come together"));
  MPI_CHECK(first_is(problems_of(stats(0.5, -0.1, 0, 1)), "channel 0 statistics contradict"));
  MPI_CHECK(first_is(problems_of(stats(0.5, 0.1, 1, 0)), "channel 0 statistics contradict"));
  MPI_CHECK(first_is(problems_of(stats(kNaN, 0.1, 0, 1)), "attribute 'mean' entry 0 is nan"));
  MPI_CHECK(first_is(problems_of([](io::File& f) {
                       f.set_attr("/fields/u", "mean", D{0.5, 0.5});
                     }),
                     "attribute 'mean' has 2 entries, expected 1"));
  MPI_CHECK(first_is(problems_of([&](io::File& f) {
                       stats(0.5, 0.1, 0, 1)(f);
                       f.set_attr("/fields/u", "stats_count", std::int64_t{7});
                     }),
                     "attribute 'stats_count' is 7, the dataset has 48 values per channel"));
  MPI_CHECK(problems_of([&](io::File& f) {
              stats(0.5, 0.1, 0, 1)(f);
              f.set_attr("/fields/u", "stats_count", std::int64_t{48});
            }).empty());
}
