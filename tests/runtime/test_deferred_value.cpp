// Deferred parameter values: a block made from the seed equals the same block of the whole,
// loading a state allocates the value, and the counter-based draws have the moments they
// should.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "runtime/nn/parameter_shard.hpp"
#include "runtime/nn/state_dict.hpp"

using namespace tessera;

TEST_CASE("a deferred block equals the same block of the whole", "[deferred]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int nd = 1 + static_cast<int>(rng() % 5);
    std::vector<Index> shape;
    for (int d = 0; d < nd; ++d) shape.push_back(1 + static_cast<Index>(rng() % 5));
    const DeferredValue dv{shape, trial % 2 ? DType::f64 : DType::f32, MemSpace::Host,
                           [](Index i) { return 0.5 + static_cast<double>(i); }};
    const Tensor whole = deferred_block(dv, Box::from_shape(shape));
    for (Index i = 0; i < whole.numel(); ++i)  // row-major flat indices
      REQUIRE((dv.dtype == DType::f64 ? whole.data<double>()[i] : whole.data<float>()[i]) ==
              0.5 + static_cast<double>(i));
    Box b = Box::from_shape(shape);
    for (int d = 0; d < nd; ++d) {
      b.lo[d] = static_cast<Index>(rng() % static_cast<unsigned>(shape[d]));
      b.hi[d] = b.lo[d] + 1 + static_cast<Index>(rng() % static_cast<unsigned>(shape[d] - b.lo[d]));
    }
    const Tensor block = deferred_block(dv, b);
    const Tensor want = whole.view(b).contiguous();
    REQUIRE(block.shape() == want.shape());
    REQUIRE(std::memcmp(block.raw(), want.raw(), want.nbytes()) == 0);
  }
}

TEST_CASE("a deferred parameter: shape and type before, whole after materialize or a load",
          "[deferred]") {
  Parameter p;
  p.name = "w";
  defer_value(p, {{2, 3}, DType::f64, MemSpace::Host, [](Index i) { return 1.0 * i; }});
  REQUIRE(p.awaits_layout);
  REQUIRE(!p.value.defined());
  REQUIRE(global_shape(p) == std::vector<Index>{2, 3});
  REQUIRE(parameter_dtype(p) == DType::f64);
  REQUIRE(gather_global(p, p.value).data<double>()[5] == 5.0);  // the initial value, whole
  materialize(p);
  REQUIRE(!p.deferred);
  REQUIRE(p.value.shape() == std::vector<Index>{2, 3});
  REQUIRE(p.grad.shape() == std::vector<Index>{2, 3});
  REQUIRE(p.value.data<double>()[4] == 4.0);
}

TEST_CASE("materialize for a load allocates without computing the initial values", "[deferred]") {
  Parameter p;
  p.name = "w";
  int calls = 0;
  defer_value(p, {{4, 5}, DType::f32, MemSpace::Host, [&calls](Index i) {
                    ++calls;
                    return 1.0 * i;
                  }});
  materialize(p, false);  // what a load before the layout does: it overwrites the whole value
  REQUIRE(calls == 0);
  REQUIRE(!p.deferred);
  REQUIRE(p.value.shape() == std::vector<Index>{4, 5});
  REQUIRE(p.value.dtype() == DType::f32);
  REQUIRE(p.grad.shape() == std::vector<Index>{4, 5});
  materialize(p);  // a parameter that holds its value: nothing
  REQUIRE(calls == 0);
}

TEST_CASE("counter-based draws: in range, with the moments of their laws", "[deferred]") {
  const std::uint64_t n = 200000;
  double su = 0, suu = 0, sn = 0, snn = 0, lo = 1, hi = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double u = counter_uniform(7, i), z = counter_normal(7, i);
    lo = std::min(lo, u), hi = std::max(hi, u);
    su += u, suu += u * u, sn += z, snn += z * z;
  }
  const double dn = static_cast<double>(n);
  REQUIRE(lo >= 0.0);
  REQUIRE(hi < 1.0);
  // Means and variances within 5 standard errors.
  REQUIRE(std::abs(su / dn - 0.5) < 5 * std::sqrt(1.0 / 12 / dn));
  REQUIRE(std::abs(suu / dn - su * su / dn / dn - 1.0 / 12) < 5 * 0.0745 / std::sqrt(dn));
  REQUIRE(std::abs(sn / dn) < 5 / std::sqrt(dn));
  REQUIRE(std::abs(snn / dn - 1.0) < 5 * std::sqrt(2.0 / dn));
  // Another seed gives other numbers.
  REQUIRE(counter_uniform(7, 3) != counter_uniform(8, 3));
}
