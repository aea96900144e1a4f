// Parameter state of a graph by registry name: save, load into a fresh model (any
// dtype, the values exactly), and errors naming the entry; a failed load changes nothing.
#include <catch2/catch.hpp>
#include <memory>

#include "runtime/nn/graph.hpp"
#include "runtime/nn/state_dict.hpp"

using namespace tessera;

namespace {

// Two parameters, no compute: the registry is all these tests need.
class Holder : public Layer {
 public:
  Holder(DType dt, double seed) {
    w_ = {"weight", Tensor::empty({2, 3}, dt), Tensor::zeros({2, 3}, dt)};
    b_ = {"bias", Tensor::empty({3}, dt), Tensor::zeros({3}, dt)};
    for (Index i = 0; i < 6; ++i) set(w_.value, i, seed + static_cast<double>(i) / 3);
    for (Index i = 0; i < 3; ++i) set(b_.value, i, -seed - static_cast<double>(i));
  }
  static void set(const Tensor& t, Index i, double v) {
    if (t.dtype() == DType::f64)
      t.data<double>()[i] = v;
    else
      t.data<float>()[i] = static_cast<float>(v);
  }
  ShardSpec output_spec(const ShardSpec& in) const override { return in; }
  ShardTensor forward(const ShardTensor& x) override { return x; }
  ShardTensor backward(const ShardTensor& dy) override { return dy; }
  std::vector<Parameter*> parameters() override { return {&w_, &b_}; }
  std::string name() const override { return "Holder"; }

 private:
  Parameter w_, b_;
};

Graph model(DType dt, double seed) {
  Graph g;
  const Value x = g.input("x");
  g.output(g.layer("dec", std::make_shared<Holder>(dt, seed + 10),
                   g.layer("enc", std::make_shared<Holder>(dt, seed), x)));
  return g;
}

}  // namespace

TEST_CASE("parameter state saves by name and loads into a fresh model", "[state]") {
  const Graph a = model(DType::f64, 1.0);
  const auto saved = parameter_state(a);
  REQUIRE(saved.size() == 4);
  CHECK(saved[0].name == "enc.weight");
  CHECK(saved[3].name == "dec.bias");
  const Graph b = model(DType::f64, 5.0);
  load_parameter_state(b, saved);
  for (const auto& np : b.parameters())
    for (Index i = 0; i < np.param->value.numel(); ++i)
      CHECK(np.param->value.data<double>()[i] == a.parameter(np.name).value.data<double>()[i]);
  // Into float32 parameters: converted.
  const Graph c = model(DType::f32, 7.0);
  load_parameter_state(c, saved);
  CHECK(c.parameter("enc.weight").value.data<float>()[4] ==
        static_cast<float>(a.parameter("enc.weight").value.data<double>()[4]));
}

TEST_CASE("parameter state errors name the entry and leave the model unchanged", "[state]") {
  const Graph a = model(DType::f64, 1.0);
  const Graph b = model(DType::f64, 5.0);
  const double before = b.parameter("dec.bias").value.data<double>()[0];
  auto missing = parameter_state(a);
  missing.pop_back();
  CHECK_THROWS_WITH(load_parameter_state(b, missing),
                    Catch::Contains("no entry for parameter 'dec.bias'"));
  auto shaped = parameter_state(a);
  shaped[1].tensor = Tensor::zeros({4}, DType::f64);
  CHECK_THROWS_WITH(load_parameter_state(b, shaped),
                    Catch::Contains("'enc.bias' has shape (4), the parameter (3)"));
  auto extra = parameter_state(a);
  extra.push_back({"head.weight", Tensor::zeros({1}, DType::f64)});
  CHECK_THROWS_WITH(load_parameter_state(b, extra),
                    Catch::Contains("'head.weight' is not a parameter"));
  CHECK(b.parameter("dec.bias").value.data<double>()[0] == before);  // nothing loaded
  load_parameter_state(b, extra, /*strict=*/false);
  CHECK(b.parameter("dec.bias").value.data<double>()[0] ==
        a.parameter("dec.bias").value.data<double>()[0]);
  auto twice = parameter_state(a);
  twice.push_back(twice.front());
  CHECK_THROWS_WITH(load_parameter_state(b, twice), Catch::Contains("'enc.weight' appears twice"));
  auto ints = parameter_state(a);
  ints[3].tensor = Tensor::zeros({3}, DType::i64);  // the last entry: nothing before it loads
  const double enc0 = b.parameter("enc.weight").value.data<double>()[0];
  load_parameter_state(b, parameter_state(model(DType::f64, 9.0)));
  const double fresh = b.parameter("enc.weight").value.data<double>()[0];
  CHECK(fresh != enc0);
  CHECK_THROWS_WITH(load_parameter_state(b, ints),
                    Catch::Contains("'dec.bias': cannot convert int64"));
  CHECK(b.parameter("enc.weight").value.data<double>()[0] == fresh);
}
