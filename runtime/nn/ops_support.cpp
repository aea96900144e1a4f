#include "runtime/nn/ops_support.hpp"

#include <algorithm>

#include "runtime/comm/comm_timers.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {

DType kernel_scalar(DType dt, const char* where) {
  TESSERA_CHECK(dt == DType::f32 || dt == DType::f64,
                where << ": float32 or float64 tensors only, got " << name_of(dt));
  return dt;
}

std::vector<int> axes_sharding_dims(const ShardSpec& spec, const std::vector<int>& dims) {
  std::vector<int> axes;
  for (int d = 0; d < spec.ndim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) continue;
    if (spec.placement(d).sharded()) axes.push_back(spec.placement(d).axis);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

std::vector<int> token_dims(int ndim) {
  std::vector<int> d;
  for (int i = 2; i < ndim; ++i) d.push_back(i);
  return d;
}

void allreduce_sum(const Mesh& mesh, const std::vector<int>& axes, double* buf, Index n) {
  const ScopedCommTimer timer(comm_times().allreduce_s);
  for (int a : axes) {
    if (mesh.dim(a) == 1) continue;
    const Index piece = piece_units(MPI_DOUBLE);  // within MPI's int count
    for (Index at = 0; at < n; at += piece)
      TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, buf + at, static_cast<int>(std::min(piece, n - at)),
                                MPI_DOUBLE, MPI_SUM, mesh.axis_comm(a)));
  }
}

void add_param_grad(const std::vector<int>& axes, const Tensor& local, Index offset, Parameter& p) {
  const Index n = local.numel();
  TESSERA_CHECK(p.grad.is_contiguous() && offset >= 0 && offset + n <= p.grad.numel(),
                "add_param_grad: " << n << " values at " << offset << " for gradient '" << p.name
                                   << "' of " << p.grad.numel());
  p.grad_axes = axes;
  if (n == 0) return;
  const Tensor dst = p.grad.reshape({p.grad.numel()}).view(Box({offset}, {offset + n}));
  // A host-side sum (a layer's float64 token part) goes to the device the gradient lives on.
  const Tensor src = local.in_space(dst.space()).contiguous().reshape({n});
  if (src.dtype() == dst.dtype())
    add_into(dst, src);
  else
    add_f64_into(dst, src);
}

Parameter make_param(const std::string& name, const std::vector<Index>& shape, double fill,
                     DType dt, MemSpace space) {
  Tensor v = Tensor::empty(shape, dt);
  for (Index i = 0; i < v.numel(); ++i) {
    if (dt == DType::f64)
      v.data<double>()[i] = fill;
    else
      v.data<float>()[i] = static_cast<float>(fill);
  }
  return Parameter{name, v.to(space), Tensor::zeros(shape, dt, space)};
}

void fill_uniform(const Tensor& t, std::mt19937_64& rng, double bound) {
  std::uniform_real_distribution<double> u(-bound, bound);
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  for (Index i = 0; i < h.numel(); ++i) {
    const double v = u(rng);
    if (t.dtype() == DType::f64)
      h.data<double>()[i] = v;
    else
      h.data<float>()[i] = static_cast<float>(v);
  }
  t.copy_from(h);
}

std::vector<double> param_values(const Parameter& p) {
  const Tensor h = p.value.to(MemSpace::Host).contiguous();
  std::vector<double> v(static_cast<std::size_t>(h.numel()));
  for (Index i = 0; i < h.numel(); ++i)
    v[i] = h.dtype() == DType::f64 ? h.data<double>()[i] : h.data<float>()[i];
  return v;
}

ShardSpec with_channels(const ShardSpec& in, Index c) {
  std::vector<Index> shape = in.global_shape();
  shape[1] = c;
  std::vector<std::vector<Index>> sizes(shape.size());
  for (int d = 0; d < in.ndim(); ++d)
    if (in.placement(d).sharded()) sizes[static_cast<std::size_t>(d)] = in.sizes(d);
  return ShardSpec(shape, in.placements(), in.mesh_dims(), {}, sizes);
}

void check_without_room(const ShardTensor& t, const std::string& where, const char* what) {
  TESSERA_CHECK(!t.has_room(), where << ": " << what
                                     << " carries ghost room (a strided shard), which this layer"
                                        " does not take; pass it through without_room()");
}

void check_layer_input(const ShardTensor& x, int min_nd, int max_nd, const std::string& where,
                       bool takes_room) {
  TESSERA_CHECK(x.local().defined(), where << ": undefined input");
  if (!takes_room) check_without_room(x, where, "input");
  TESSERA_CHECK(!x.spec().has_partial(), where << ": input has Partial axes (" << x.spec().str()
                                               << "); redistribute to Shard or Replicate first");
  kernel_scalar(x.dtype(), where.c_str());
  TESSERA_CHECK(x.spec().ndim() >= min_nd && x.spec().ndim() <= max_nd,
                where << ": input of rank " << x.spec().ndim() << ", expected " << min_nd
                      << (min_nd == max_nd ? "" : " to " + std::to_string(max_nd))
                      << " (N, C, spatial...)");
}

void check_spatial_spec(const ShardSpec& in, int nd, const std::string& where) {
  TESSERA_CHECK(in.ndim() == nd + 2, where << ": input of rank " << in.ndim() << ", expected "
                                           << nd + 2 << " (N, C, spatial...)");
  TESSERA_CHECK(!in.has_partial(), where << ": input has Partial axes (" << in.str() << ")");
}

void check_output_grad(const ShardTensor& dy, const ShardSpec& out, DType dt, MemSpace space,
                       const std::string& where) {
  TESSERA_CHECK(dy.spec() == out, where << ": output gradient laid out as " << dy.spec().str()
                                        << ", forward produced " << out.str());
  TESSERA_CHECK(dy.dtype() == dt && dy.local().space() == space,
                where << ": output gradient is " << name_of(dy.dtype()) << " in "
                      << name_of(dy.local().space()) << " memory, the input was " << name_of(dt)
                      << " in " << name_of(space));
}

}  // namespace tessera
