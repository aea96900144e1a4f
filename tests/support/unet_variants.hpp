#pragma once
// The two small float64 UNets the sharded-model tests run: pool/upsample with GroupNorm and
// GELU, and strided conv/transposed conv with BatchNorm, ReLU and 5x5 kernels.
#include "runtime/train/unet.hpp"

namespace tessera::test {

inline UNetOptions unet_pool_groupnorm() {
  UNetOptions o;
  o.nd = 2;
  o.in_channels = 2;
  o.out_channels = 1;
  o.width = 4;
  o.depth = 2;
  o.groups = 2;
  o.dtype = DType::f64;
  o.seed = 3;
  return o;
}

inline UNetOptions unet_strided_batchnorm() {
  UNetOptions o;
  o.nd = 2;
  o.in_channels = 1;
  o.out_channels = 2;
  o.width = 3;
  o.depth = 2;
  o.norm = UNetOptions::Norm::Batch;
  o.activation = kernels::Activation::ReLU;
  o.down = UNetOptions::Down::StridedConv;
  o.up = UNetOptions::Up::TransposedConv;
  o.kernel = 5;
  o.dtype = DType::f64;
  return o;
}

}  // namespace tessera::test
