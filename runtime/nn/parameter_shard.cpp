#include "runtime/nn/parameter_shard.hpp"

#include <mpi.h>

#include <climits>
#include <cmath>
#include <numbers>

#include "decomp/hash.hpp"

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {

double counter_uniform(std::uint64_t seed, std::uint64_t i) {
  return static_cast<double>(splitmix64(splitmix64(seed) + i) >> 11) * 0x1.0p-53;
}

double counter_normal(std::uint64_t seed, std::uint64_t i) {
  const double u1 = 1.0 - counter_uniform(seed, 2 * i), u2 = counter_uniform(seed, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void defer_value(Parameter& p, DeferredValue d) {
  TESSERA_CHECK(d.dtype == DType::f32 || d.dtype == DType::f64,
                "parameter '" << p.name << "': a deferred value is float32 or float64");
  p.value = Tensor();
  p.grad = Tensor();
  p.deferred = std::make_shared<const DeferredValue>(std::move(d));
  p.awaits_layout = true;
}

Tensor deferred_block(const DeferredValue& d, const Box& block) {
  Tensor t = Tensor::empty(block.shape(), d.dtype);
  const int nd = block.ndim;
  std::vector<Index> idx(block.lo, block.lo + nd);
  for (Index k = 0; k < t.numel(); ++k) {
    Index g = 0;
    for (int a = 0; a < nd; ++a) g = g * d.shape[static_cast<std::size_t>(a)] + idx[a];
    const double v = d.at(g);
    if (d.dtype == DType::f64)
      t.data<double>()[k] = v;
    else
      t.data<float>()[k] = static_cast<float>(v);
    for (int a = nd - 1; a >= 0 && ++idx[a] == block.hi[a]; --a) idx[a] = block.lo[a];
  }
  return t;
}

void materialize(Parameter& p, bool initial) {
  if (!p.deferred) return;
  const DeferredValue& d = *p.deferred;
  p.value = initial ? deferred_block(d, Box::from_shape(d.shape)).to(d.space)
                    : Tensor::empty(d.shape, d.dtype, d.space);
  p.grad = Tensor::zeros(d.shape, d.dtype, d.space);
  p.deferred = nullptr;
}

void shard_parameter(Parameter& p, const Mesh& mesh, const Box& block, std::vector<int> axes) {
  TESSERA_CHECK(!p.shard, "parameter '" << p.name << "' is sharded already");
  const std::vector<Index> shape = global_shape(p);
  auto s = std::make_shared<ParameterShard>();
  s->global_shape = shape;
  s->block = block;
  s->axes = std::move(axes);
  s->comm = AxesComm(mesh, s->axes);
  // The blocks over `axes` must cover the tensor once: inside it, volumes adding up to it.
  const bool inside =
      Box::from_shape(shape).contains(block) && block.ndim == static_cast<int>(shape.size());
  long long mine[2] = {inside ? static_cast<long long>(block.volume()) : 0, inside ? 0 : 1};
  long long sum[2] = {0, 0};  // volumes, blocks outside the tensor
  TESSERA_MPI(MPI_Allreduce(mine, sum, 2, MPI_LONG_LONG, MPI_SUM, s->comm.comm()));
  collective_check(
      mesh.comm(), sum[1] == 0 && sum[0] == static_cast<long long>(numel_of(shape)),
      "parameter '" + p.name + "': its blocks over the shard axes do not tile " + shape_str(shape));
  if (p.deferred) {  // only this rank's block is ever allocated
    p.value = deferred_block(*p.deferred, block).to(p.deferred->space);
    p.deferred = nullptr;
  } else {
    p.value = p.value.view(block).contiguous().clone();
  }
  p.grad = Tensor::zeros(p.value.shape(), p.value.dtype(), p.value.space());
  p.shard = std::move(s);
  p.awaits_layout = false;
}

std::vector<Index> global_shape(const Parameter& p) {
  return p.shard ? p.shard->global_shape : p.deferred ? p.deferred->shape : p.value.shape();
}

DType parameter_dtype(const Parameter& p) {
  return p.deferred ? p.deferred->dtype : p.value.dtype();
}

Tensor gather_global(const Parameter& p, const Tensor& local) {
  if (p.deferred && !local.defined())  // the initial value, not yet allocated
    return deferred_block(*p.deferred, Box::from_shape(p.deferred->shape));
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
