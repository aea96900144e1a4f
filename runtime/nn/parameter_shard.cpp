#include "runtime/nn/parameter_shard.hpp"

#include <mpi.h>

#include <climits>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {

void shard_parameter(Parameter& p, const Mesh& mesh, const Box& block, std::vector<int> axes) {
  TESSERA_CHECK(!p.shard, "parameter '" << p.name << "' is sharded already");
  const std::vector<Index> shape = p.value.shape();
  auto s = std::make_shared<ParameterShard>();
  s->global_shape = shape;
  s->block = block;
  s->axes = std::move(axes);
  s->comm = AxesComm(mesh, s->axes);
  // The blocks over `axes` must cover the tensor once: inside it, volumes adding up to it.
  const bool inside = Box::from_shape(shape).contains(block) && block.ndim == p.value.ndim();
  long long mine[2] = {inside ? static_cast<long long>(block.volume()) : 0, inside ? 0 : 1};
  long long sum[2] = {0, 0};  // volumes, blocks outside the tensor
  TESSERA_MPI(MPI_Allreduce(mine, sum, 2, MPI_LONG_LONG, MPI_SUM, s->comm.comm()));
  collective_check(
      mesh.comm(), sum[1] == 0 && sum[0] == static_cast<long long>(numel_of(shape)),
      "parameter '" + p.name + "': its blocks over the shard axes do not tile " + shape_str(shape));
  p.value = p.value.view(block).contiguous().clone();
  p.grad = Tensor::zeros(p.value.shape(), p.value.dtype(), p.value.space());
  p.shard = std::move(s);
  p.awaits_layout = false;
}

std::vector<Index> global_shape(const Parameter& p) {
  return p.shard ? p.shard->global_shape : p.value.shape();
}

Tensor gather_global(const Parameter& p, const Tensor& local) {
  const Tensor h = local.to(MemSpace::Host);
  if (!p.shard) return h.clone();
  const ParameterShard& s = *p.shard;
  TESSERA_CHECK(local.shape() == p.value.shape(),
                "parameter '" << p.name << "': a block of shape " << shape_str(local.shape())
                              << ", the parameter's is " << shape_str(p.value.shape()));
  TESSERA_CHECK(h.dtype() == DType::f32 || h.dtype() == DType::f64,
                "parameter '" << p.name << "': gathering " << name_of(h.dtype()));
  // Every element lies in one block of the group: a sum of zero-padded blocks is exact.
  Tensor g = Tensor::zeros(s.global_shape, h.dtype());
  g.view(s.block).copy_from(h);
  const Index n = g.numel();
  TESSERA_CHECK(n <= INT_MAX, "parameter '" << p.name << "' is too large to gather");
  TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, g.raw(), static_cast<int>(n),
                            h.dtype() == DType::f64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM,
                            s.comm.comm()));
  return g;
}

Tensor local_block(const Parameter& p, const Tensor& global) {
  const Tensor h = global.to(MemSpace::Host);
  if (!p.shard) return h;
  TESSERA_CHECK(h.shape() == p.shard->global_shape,
                "parameter '" << p.name << "': a global tensor of shape " << shape_str(h.shape())
                              << ", the parameter's is " << shape_str(p.shard->global_shape));
  return h.view(p.shard->block).contiguous();
}

std::string layout_problem(const Parameter& p) {
  if (!p.awaits_layout) return "";
  return "parameter '" + p.name +
         "' is sharded by its layer's input decomposition and has no layout yet: bind the "
         "graph to its input specs first (Graph::bind)";
}

}  // namespace tessera
