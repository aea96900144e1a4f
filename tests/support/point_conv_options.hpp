#pragma once
// The small PointConv the point-layer tests share: 3 -> 4 channels over 5 neighbours (kNN,
// or at most 5 within 0.35), max or mean, coordinates read from source channel pos_offset.
#include "runtime/points/point_conv.hpp"

namespace tessera::test {

inline PointConvOptions point_conv_options(DType dt, bool ball, bool mean, int pos_offset) {
  PointConvOptions o;
  o.in_channels = 3;
  o.out_channels = 4;
  o.neighbourhood.neighbours = 5;
  o.neighbourhood.radius = ball ? 0.35 : 0.0;
  o.mean = mean;
  o.pos_offset = pos_offset;
  o.dtype = dt;
  o.seed = 3;
  return o;
}

}  // namespace tessera::test
