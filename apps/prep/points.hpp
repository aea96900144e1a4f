#pragma once
// Point clouds on a surface (torus or sphere) with normal noise, and a smooth field
// value on each point. Point j of sample n is a pure function of (seed, n, j), so any
// split of the points over ranks gives the same cloud.
#include <cstdint>
#include <string>

#include "decomp/box.hpp"

namespace tessera::prep {

struct PointsParams {
  std::uint64_t seed = 1;
  std::string surface = "torus";  // or "sphere"
  double noise = 0.01;            // standard deviation along the surface normal
};

// Points [begin, end) of sample n: xyz into coords (3 per point), the field into value.
void make_points(const PointsParams& p, std::uint64_t sample, Index begin, Index end, float* coords,
                 float* value);

}  // namespace tessera::prep
