#include "runtime/nn/coordinate_channels.hpp"

#include "runtime/nn/ops_support.hpp"

namespace tessera {

ShardSpec CoordinateChannels::output_spec(const ShardSpec& in) const {
  check_spatial_spec(in, nd_, name());
  TESSERA_CHECK(!in.placement(1).sharded(), name() << ": the channel dim is sharded");
  std::vector<Index> shape = in.global_shape();
  shape[1] += nd_;
  std::vector<std::vector<Index>> sizes(static_cast<std::size_t>(in.ndim()));
  for (int d = 0; d < in.ndim(); ++d)
    if (in.placement(d).sharded()) sizes[static_cast<std::size_t>(d)] = in.sizes(d);
  return ShardSpec(shape, in.placements(), in.mesh_dims(), {}, sizes);
}

ShardTensor CoordinateChannels::forward(const ShardTensor& x) {
  check_layer_input(x, nd_ + 2, nd_ + 2, name());
  const ShardSpec out = output_spec(x.spec());
  in_spec_ = x.spec();
  const Tensor& xl = x.local();
  const Box box = x.local_box();
  const Index c = xl.shape(1);
  std::vector<Index> shape = xl.shape();
  shape[1] += nd_;
  // Coordinates are made on the host (once per forward, a few channels) and copied over.
  std::vector<Index> cshape = shape;
  cshape[1] = nd_;
  Tensor coords = Tensor::empty(cshape, xl.dtype());
  // Cells per sample and channel (an empty local batch or block has none).
  const Index cells = shape[0] == 0 ? 0 : coords.numel() / (shape[0] * nd_);
  for (Index n = 0; n < shape[0]; ++n)
    for (int d = 0; d < nd_; ++d)
      for (Index i = 0; i < cells; ++i) {
        // Index along spatial dim d of cell i (row-major over the local spatial block).
        Index rest = i, idx = 0;
        for (int e = nd_ - 1; e >= 0; --e) {
          const Index ext = shape[static_cast<std::size_t>(e) + 2];
          if (e == d) idx = rest % ext;
          rest /= ext;
        }
        const Index n_glob = x.global_shape()[static_cast<std::size_t>(d) + 2];
        const double v =
            n_glob > 1 ? static_cast<double>(box.lo[d + 2] + idx) / static_cast<double>(n_glob - 1)
                       : 0.0;
        const Index at = (n * nd_ + d) * cells + i;
        if (xl.dtype() == DType::f64)
          coords.data<double>()[at] = v;
        else
          coords.data<float>()[at] = static_cast<float>(v);
      }
  Tensor y = Tensor::empty(shape, xl.dtype(), xl.space());
  Box lo = Box::from_shape(shape), hi = Box::from_shape(shape);
  lo.hi[1] = c;
  hi.lo[1] = c;
  y.view(lo).copy_from(xl);
  y.view(hi).copy_from(coords);
  return ShardTensor::unchecked(x.mesh(), out, y);
}

ShardTensor CoordinateChannels::backward(const ShardTensor& dy) {
  TESSERA_CHECK(in_spec_.ndim() > 0, name() << ": backward before forward");
  const Tensor& g = dy.local();
  Box first = Box::from_shape(g.shape());
  first.hi[1] = in_spec_.global_shape()[1];
  return ShardTensor::unchecked(dy.mesh(), in_spec_, g.view(first).contiguous());
}

}  // namespace tessera
