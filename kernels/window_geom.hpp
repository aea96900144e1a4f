#pragma once
// Geometry shared by the window kernels (upsampling, padding), normalized to 3 spatial dims
// (unused leading dims have extent 1): the input window x holds and the output window to
// produce, in global coordinates, and x's element strides.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"

namespace tessera::kernels {

struct WindowGeom {
  Index n = 1, c = 1;
  Index ilo[3] = {0, 0, 0}, in[3] = {1, 1, 1};  // input window (global origin, extent)
  Index olo[3] = {0, 0, 0}, on[3] = {1, 1, 1};  // output window
  Index xs[5] = {0, 0, 0, 0, 0};                // strides of (n, c, d0, d1, d2) in x (and dx)

  TESSERA_HD Index out_count() const { return n * c * on[0] * on[1] * on[2]; }
  TESSERA_HD Index in_count() const { return n * c * in[0] * in[1] * in[2]; }
  // Offset in x (and dx) of input cell p (global) of sample nn, channel cc.
  TESSERA_HD Index x_offset(Index nn, Index cc, const Index p[3]) const {
    return nn * xs[0] + cc * xs[1] + (p[0] - ilo[0]) * xs[2] + (p[1] - ilo[1]) * xs[3] +
           (p[2] - ilo[2]) * xs[4];
  }
  // Normalized dim d's windows from a descriptor's.
  void set_windows(int d, Index in_lo, Index in_n, Index out_lo, Index out_n) {
    ilo[d] = in_lo;
    in[d] = in_n;
    olo[d] = out_lo;
    on[d] = out_n;
  }
};

}  // namespace tessera::kernels
