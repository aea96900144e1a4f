// The sharded pooling (ceil mode, dilation), upsampling (aligned corners), padding,
// normalization and pointwise layers on CUDA tensors
// against the same layers on host tensors (same mesh, same shards): forward, input
// gradient and parameter gradients, float32 and float64. Skips, saying so, where no
// device exists.
#include <iostream>

#include "kernels/device/device.hpp"
#include "runtime/nn/norm_layers.hpp"
#include "runtime/nn/pad_layer.hpp"
#include "runtime/nn/pointwise_layers.hpp"
#include "runtime/nn/pool_layer.hpp"
#include "runtime/nn/upsample_layer.hpp"
#include "tests/support/have_device.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/ops_layer_check.hpp"

using namespace tessera;
namespace ops = tessera::test::ops;

namespace {
struct Run {
  Tensor y, dx;
  std::vector<Tensor> grads;
};

// One forward and backward of make(space) on x scattered over mesh, results on the host.
Run run(const Mesh& mesh, const std::function<std::unique_ptr<Layer>(MemSpace)>& make,
        const Tensor& x, MemSpace space) {
  auto l = make(space);
  ops::randomize_parameters(*l, 5);
  const std::vector<Placement> dims = ops::layer_dims(mesh, x.ndim() - 2);
  const ShardTensor xs = ShardTensor::scatter(mesh, x.to(space), dims);
  const ShardTensor ys = l->forward(xs);
  const Tensor dy = ops::random_tensor(ys.global_shape(), x.dtype(), 9);
  const ShardTensor dxs = l->backward(ShardTensor::scatter(mesh, dy.to(space), ys.spec()));
  sync_grads(mesh, l->parameters());
  Run r{ys.gather_all().to(MemSpace::Host), dxs.gather_all().to(MemSpace::Host), {}};
  for (Parameter* p : l->parameters()) r.grads.push_back(p->grad.to(MemSpace::Host));
  return r;
}

double compare(const Run& a, const Run& b) {
  double w = std::max(ops::rel_error(a.y, b.y), ops::rel_error(a.dx, b.dx));
  if (a.grads.size() != b.grads.size()) return 1e300;
  for (std::size_t i = 0; i < a.grads.size(); ++i)
    w = std::max(w, ops::rel_error(a.grads[i], b.grads[i]));
  return w;
}
}  // namespace

TEST_CASE("Sharded op layers on CUDA tensors equal the host path", "[gpu]") {
  if (!test::have_device()) return;
  const Mesh mesh = Mesh::line(test::harness_comm());
  for (DType dt : {DType::f64, DType::f32}) {
    const Tensor x2 = ops::random_tensor({2, 4, 11, 9}, dt, 1, -1.0, 2.0);
    const Tensor x3 = ops::random_tensor({1, 4, 6, 5, 7}, dt, 2, -1.0, 2.0);
    struct Case {
      std::string what;
      std::function<std::unique_ptr<Layer>(MemSpace)> make;
      const Tensor* x;
    };
    PoolOptions mp;
    mp.kernel = {3, 3};
    mp.stride = {2, 2};
    mp.pad_lo = {1, 1};
    PoolOptions ap;
    ap.kind = PoolOptions::Kind::Avg;
    ap.kernel = {3, 3, 3};
    ap.stride = {1, 1, 1};
    ap.pad_lo = {1, 1, 1};
    UpsampleOptions ul;
    ul.mode = UpsampleOptions::Mode::Linear;
    ul.scale = {2, 3};
    UpsampleOptions un;
    un.scale = {2, 2, 2};
    PoolOptions mc = mp;  // ceil mode (dim 0 overhangs by one cell), dilated
    mc.ceil_mode = true;
    mc.stride = {3, 2};
    mc.dilation = {2, 1};
    PoolOptions ac = ap;  // ceil mode, an overhang (dim 0) the divisor leaves out
    ac.stride = {2, 2, 2};
    ac.ceil_mode = true;
    UpsampleOptions ua = ul;
    ua.align_corners = true;
    PadOptions pr;
    pr.mode = PadOptions::Mode::Reflect;
    pr.pad_lo = {3, 1};
    pr.pad_hi = {2, 4};
    PadOptions pp;
    pp.mode = PadOptions::Mode::Replicate;
    pp.pad_lo = {2, 7, 1};
    pp.pad_hi = {-1, 2, -2};  // cropping too
    PadOptions pc;
    pc.mode = PadOptions::Mode::Circular;
    pc.pad_lo = {3, 1};
    pc.pad_hi = {0, 9};  // wraps more than once
    auto norm = [dt](MemSpace s) {
      NormOptions o;
      o.dtype = dt;
      o.space = s;
      return o;
    };
    const std::vector<Case> cases{
        {"max pool 2d", [&](MemSpace) { return std::make_unique<Pool>(mp); }, &x2},
        {"avg pool 3d", [&](MemSpace) { return std::make_unique<Pool>(ap); }, &x3},
        {"linear upsample 2d", [&](MemSpace) { return std::make_unique<Upsample>(ul); }, &x2},
        {"nearest upsample 3d", [&](MemSpace) { return std::make_unique<Upsample>(un); }, &x3},
        {"max pool 2d ceil dilated", [&](MemSpace) { return std::make_unique<Pool>(mc); }, &x2},
        {"avg pool 3d ceil", [&](MemSpace) { return std::make_unique<Pool>(ac); }, &x3},
        {"linear upsample 2d aligned corners",
         [&](MemSpace) { return std::make_unique<Upsample>(ua); }, &x2},
        {"reflect pad 2d", [&](MemSpace) { return std::make_unique<Pad>(pr); }, &x2},
        {"replicate pad 3d", [&](MemSpace) { return std::make_unique<Pad>(pp); }, &x3},
        {"circular pad 2d", [&](MemSpace) { return std::make_unique<Pad>(pc); }, &x2},
        {"GroupNorm", [&](MemSpace s) { return std::make_unique<GroupNorm>(2, 4, norm(s)); }, &x2},
        {"BatchNorm", [&](MemSpace s) { return std::make_unique<BatchNorm>(4, norm(s)); }, &x3},
        {"ChannelLayerNorm",
         [&](MemSpace s) { return std::make_unique<ChannelLayerNorm>(4, norm(s)); }, &x2},
        {"GELU", [&](MemSpace) { return std::make_unique<ActivationLayer>(Activation::GELU); },
         &x2},
        {"ChannelBias", [&](MemSpace s) { return std::make_unique<ChannelBias>(4, dt, s); }, &x3},
    };
    for (const Case& c : cases) {
      const double err =
          compare(run(mesh, c.make, *c.x, MemSpace::Cuda), run(mesh, c.make, *c.x, MemSpace::Host));
      INFO(c.what << " " << name_of(dt) << ": " << err);
      MPI_CHECK(err <= ops::tolerance(dt));
    }
  }
}
