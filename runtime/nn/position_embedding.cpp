#include "runtime/nn/position_embedding.hpp"

#include <cmath>

#include "runtime/nn/ops_support.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {

SinusoidalPositions::SinusoidalPositions(int nd, Index channels) : nd_(nd), channels_(channels) {
  TESSERA_CHECK(nd >= 1 && nd <= 3 && channels >= 1,
                "SinusoidalPositions: nd " << nd << ", channels " << channels);
}

ShardSpec SinusoidalPositions::output_spec(const ShardSpec& in) const {
  check_spatial_spec(in, nd_, name());
  TESSERA_CHECK(
      in.global_shape()[1] == channels_ && !in.placement(1).sharded(),
      name() << ": input " << in.str() << ", expected " << channels_ << " unsharded channels");
  return in;
}

ShardTensor SinusoidalPositions::forward(const ShardTensor& x) {
  check_layer_input(x, nd_ + 2, nd_ + 2, name());
  output_spec(x.spec());
  spec_ = x.spec();
  const Tensor& xl = x.local();
  const Box box = x.local_box();
  const std::vector<Index>& shape = xl.shape();
  const Index N = shape[0], C = channels_, cells = N > 0 ? xl.numel() / (N * C) : 0;
  const Index group = C / nd_;  // channels per spatial dim
  Tensor pe = Tensor::zeros(shape, xl.dtype());
  for (Index n = 0; n < N; ++n)
    for (Index i = 0; i < cells; ++i) {
      Index rest = i;
      double u[3] = {0, 0, 0};
      for (int e = nd_ - 1; e >= 0; --e) {
        const Index ext = shape[static_cast<std::size_t>(e) + 2];
        const Index g = x.global_shape()[static_cast<std::size_t>(e) + 2];
        u[e] = g > 1 ? static_cast<double>(box.lo[e + 2] + rest % ext) / static_cast<double>(g - 1)
                     : 0.0;
        rest /= ext;
      }
      for (int d = 0; d < nd_; ++d)
        for (Index k = 0; 2 * k + 1 < group; ++k) {
          const double w = M_PI * std::ldexp(1.0, static_cast<int>(k)) * u[d];
          const Index c0 = d * group + 2 * k;
          const Index a = (n * C + c0) * cells + i, b = (n * C + c0 + 1) * cells + i;
          if (xl.dtype() == DType::f64) {
            pe.data<double>()[a] = std::sin(w);
            pe.data<double>()[b] = std::cos(w);
          } else {
            pe.data<float>()[a] = static_cast<float>(std::sin(w));
            pe.data<float>()[b] = static_cast<float>(std::cos(w));
          }
        }
    }
  Tensor y = xl.clone();
  add_into(y, pe.to(xl.space()));
  return ShardTensor::unchecked(x.mesh(), x.spec(), y);
}

ShardTensor SinusoidalPositions::backward(const ShardTensor& dy) {
  TESSERA_CHECK(dy.spec() == spec_, name() << ": output gradient laid out as " << dy.spec().str()
                                           << ", forward produced " << spec_.str());
  return dy;
}

}  // namespace tessera
