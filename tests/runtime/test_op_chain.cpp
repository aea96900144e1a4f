// A UNet-like chain of the op layers (GroupNorm -> SiLU -> max pool -> BatchNorm ->
// ChannelBias -> linear upsample -> channel LayerNorm -> GELU -> avg pool): the sharded
// chain equals the chain on one rank, forward, input gradient and every parameter
// gradient, with layouts that change from layer to layer (pooling and upsampling re-split
// their outputs) on every test mesh, even and uneven input shards.
#include "runtime/nn/norm_layers.hpp"
#include "runtime/nn/pointwise_layers.hpp"
#include "runtime/nn/pool_layer.hpp"
#include "runtime/nn/upsample_layer.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/ops_layer_check.hpp"

using namespace tessera;
namespace ops = tessera::test::ops;

namespace {
// Runs layers in order and their backward in reverse, as one Layer.
class Chain : public Layer {
 public:
  explicit Chain(std::vector<std::unique_ptr<Layer>> layers) : layers_(std::move(layers)) {}
  ShardSpec output_spec(const ShardSpec& in) const override {
    ShardSpec s = in;
    for (const auto& l : layers_) s = l->output_spec(s);
    return s;
  }
  ShardTensor forward(const ShardTensor& x) override {
    ShardTensor t = x;
    for (auto& l : layers_) t = l->forward(t);
    return t;
  }
  ShardTensor backward(const ShardTensor& dy) override {
    ShardTensor g = dy;
    for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) g = (*it)->backward(g);
    return g;
  }
  std::vector<Parameter*> parameters() override {
    std::vector<Parameter*> ps;
    for (auto& l : layers_)
      for (Parameter* p : l->parameters()) ps.push_back(p);
    return ps;
  }
  std::string name() const override { return "Chain"; }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

std::unique_ptr<Layer> make_chain(DType dt, OutputSplit split) {
  NormOptions n;
  n.dtype = dt;
  n.eps = 1e-3;
  PoolOptions down;
  down.kernel = {3, 3};
  down.stride = {2, 2};
  down.pad_lo = {1, 1};
  down.split = split;
  UpsampleOptions up;
  up.mode = UpsampleOptions::Mode::Linear;
  up.scale = {2, 2};
  up.split = split;
  PoolOptions smooth;
  smooth.kind = PoolOptions::Kind::Avg;
  smooth.kernel = {3, 2};
  smooth.stride = {1, 1};
  smooth.pad_lo = {1, 0};
  smooth.pad_hi = {1, 1};
  std::vector<std::unique_ptr<Layer>> l;
  l.push_back(std::make_unique<GroupNorm>(2, 4, n));
  l.push_back(std::make_unique<ActivationLayer>(Activation::SiLU));
  l.push_back(std::make_unique<Pool>(down));
  l.push_back(std::make_unique<BatchNorm>(4, n));
  l.push_back(std::make_unique<ChannelBias>(4, dt));
  l.push_back(std::make_unique<Upsample>(up));
  l.push_back(std::make_unique<ChannelLayerNorm>(4, n));
  l.push_back(std::make_unique<ActivationLayer>(Activation::GELU));
  l.push_back(std::make_unique<Pool>(smooth));
  return std::make_unique<Chain>(std::move(l));
}
}  // namespace

TEST_CASE("A chain of sharded op layers equals the chain on one rank", "[chain]") {
  std::mt19937 rng(21);
  const std::vector<Index> shape{2, 4, 13, 10};
  int runs = 0;
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    for (int layout = 0; layout < 2; ++layout) {
      for (DType dt : {DType::f64, DType::f32}) {
        const OutputSplit split = layout == 1 ? OutputSplit::Aligned : OutputSplit::Balanced;
        const auto dims = ops::layer_dims(mesh, 2);
        const auto sizes = ops::layer_sizes(rng, mesh, shape, dims, layout > 0);
        const Tensor x = ops::random_tensor(shape, dt, 90 + runs, -1.0, 2.0);
        const auto e = ops::compare_with_single_rank(
            mesh, [&] { return make_chain(dt, split); }, x, dims, sizes);
        double g = 0;
        for (double v : e.grads) g = std::max(g, v);
        INFO(mesh.str() << " layout " << layout << " " << name_of(dt) << ": y " << e.y << " dx "
                        << e.dx << " params " << g << " (" << e.grads.size() << ")");
        MPI_CHECK(e.spec_ok);
        MPI_CHECK(e.grads.size() == 7);  // 3 norms x (gamma, beta) + bias
        // y and dx agree to ~1e-15 (f64) and ~1e-7 (f32), but a parameter gradient is a sum
        // with cancellation of upstream gradients that went through up to eight layers in
        // another summation order: its relative difference reaches ~2e-12 (f64) and a few
        // 1e-5 (f32), hence the looser float32 bound for the chain.
        MPI_CHECK(e.worst() <= (dt == DType::f64 ? ops::tolerance(dt) : 1e-4));
        ++runs;
      }
    }
  }
  MPI_CHECK(runs > 0);
}
