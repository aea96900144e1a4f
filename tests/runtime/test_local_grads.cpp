// Layers leave only their local parameter gradients: after backward and before any
// GradSync, each rank's gradient is its own contribution, declared partial over the mesh
// axes that shard the input, and the sum of those contributions over the declared axes
// is the one-rank gradient. Conv (with and without overlap), GroupNorm and ChannelBias
// in float64 on 1-D, 2-D, 3-D and domain x data meshes; then sync_grads completes them.
#include <algorithm>
#include <functional>
#include <memory>
#include <random>

#include "runtime/comm/axes_comm.hpp"
#include "runtime/comm/grad_sync.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/norm_layers.hpp"
#include "runtime/nn/pointwise_layers.hpp"
#include "runtime/nn/window_layout.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/ops_layer_check.hpp"

using namespace tessera;
namespace ops = tessera::test::ops;

namespace {

std::vector<int> sorted_unique(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Placements of (N, C, H, W): "data" shards N, other axes H then W (C is never sharded, so
// the conv takes every mesh).
std::vector<Placement> dims_for(const Mesh& mesh) {
  std::vector<Placement> dims(4, Replicate());
  int next = 2;
  for (int a = 0; a < mesh.ndim(); ++a) {
    if (mesh.names()[a] == "data")
      dims[0] = Shard(a);
    else if (next < 4)
      dims[static_cast<std::size_t>(next++)] = Shard(a);
  }
  return dims;
}

struct Check {
  bool axes_ok = true;  // grad_axes are the input's sharding axes
  double sum_err = 0;   // sum of local gradients over grad_axes vs one rank
  double synced_err = 0;
  bool partial = false;  // some rank's local gradient is not yet the whole gradient
  int group = 1;         // ranks sharding the input
};

Check check_layer(const Mesh& mesh, const ops::LayerFactory& make, const Tensor& x) {
  const Mesh self = Mesh::line(MPI_COMM_SELF);
  auto ref = make();
  auto sh = make();
  ops::randomize_parameters(*ref, 4);
  ops::randomize_parameters(*sh, 4);
  const ShardTensor yr =
      ref->forward(ShardTensor::scatter(self, x, ShardSpec::replicated(x.shape(), self)));
  const Tensor dy = ops::random_tensor(yr.global_shape(), x.dtype(), 11);
  ref->backward(ShardTensor::scatter(self, dy, yr.spec()));

  const ShardSpec spec(x.shape(), dims_for(mesh), mesh);
  const ShardTensor ys = sh->forward(ShardTensor::scatter(mesh, x, spec));
  sh->backward(ShardTensor::scatter(mesh, dy, ys.spec()));
  Check c;
  const auto pr = ref->parameters(), ps = sh->parameters();
  const std::vector<int> want = sorted_unique(sharding_axes(spec));
  c.group = AxesComm(mesh, want).size();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    c.axes_ok = c.axes_ok && sorted_unique(ps[i]->grad_axes) == want;
    const Tensor local = ps[i]->grad.to(MemSpace::Host).clone();
    const double own = ops::rel_error(local, pr[i]->grad);
    c.partial = c.partial || own > 1e-6;
    const Tensor sum = local.clone();
    const AxesComm group(mesh, ps[i]->grad_axes);
    MPI_Allreduce(MPI_IN_PLACE, sum.raw(), static_cast<int>(sum.numel()), MPI_DOUBLE, MPI_SUM,
                  group.comm());
    c.sum_err = std::max(c.sum_err, ops::rel_error(sum, pr[i]->grad));
  }
  sync_grads(mesh, ps);
  for (std::size_t i = 0; i < ps.size(); ++i)
    c.synced_err = std::max(c.synced_err, ops::rel_error(ps[i]->grad, pr[i]->grad));
  return c;
}

}  // namespace

TEST_CASE("layers accumulate local parameter gradients; their sum is the one-rank gradient",
          "[grad_sync]") {
  const Tensor x = ops::random_tensor({2, 4, 12, 10}, DType::f64, 3);
  std::vector<std::pair<std::string, ops::LayerFactory>> layers;
  for (bool overlap : {false, true}) {
    ConvOptions o;
    o.in_channels = 4;
    o.out_channels = 3;
    o.kernel = {3};
    o.padding = {1};
    o.dtype = DType::f64;
    o.overlap = overlap;
    layers.push_back(
        {overlap ? "conv (overlap)" : "conv", [o] { return std::make_unique<ConvNd>(o); }});
  }
  NormOptions no;
  no.dtype = DType::f64;
  layers.push_back({"group norm", [no] { return std::make_unique<GroupNorm>(2, 4, no); }});
  layers.push_back({"channel bias", [] { return std::make_unique<ChannelBias>(4, DType::f64); }});
  int cases = 0;
  for (const Mesh& mesh : test::test_meshes(test::harness_comm())) {
    for (const auto& [what, make] : layers) {
      INFO(what << " on mesh " << mesh.str());
      const Check c = check_layer(mesh, make, x);
      MPI_CHECK(c.axes_ok);
      MPI_CHECK(c.sum_err < 1e-12);
      MPI_CHECK(c.synced_err < 1e-12);
      // With more than one rank sharding the input, the local gradients are parts.
      int partial = c.partial ? 1 : 0;
      MPI_Allreduce(MPI_IN_PLACE, &partial, 1, MPI_INT, MPI_MAX, mesh.comm());
      MPI_CHECK((c.group > 1) == (partial == 1));
      ++cases;
    }
  }
  MPI_REQUIRE(cases > 0);
}
