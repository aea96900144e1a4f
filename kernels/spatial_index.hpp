#pragma once
// Index helpers of the kernels that normalize 1-3 spatial dims of an (n, c, spatial...)
// tensor to 3 (pooling, upsampling): user dim k becomes dim 3 - nd + k, the unused
// leading dims have extent 1.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"
#include "decomp/error.hpp"

namespace tessera::kernels {

// Splits row-major index i over (n, c, ext[0], ext[1], ext[2]) into the spatial cell
// (offset by origin, if given) and the channel and batch indices.
TESSERA_HD inline void unravel_nc3(Index i, Index c, const Index ext[3], Index cell[3], Index& cc,
                                   Index& nn, const Index* origin = nullptr) {
  for (int d = 2; d >= 0; --d) {
    cell[d] = i % ext[d] + (origin ? origin[d] : 0);
    i /= ext[d];
  }
  cc = i % c;
  nn = i / c;
}

// Checks the dims and counts of a descriptor; `op` names the operation in the message.
inline void check_nd_nc(int nd, Index n, Index c, const char* where, const char* op) {
  TESSERA_CHECK(nd >= 1 && nd <= 3,
                where << ": " << op << " needs 1 to 3 spatial dims, got " << nd);
  TESSERA_CHECK(n >= 0 && c >= 0, where << ": negative batch or channel count");
}

// Checks dim k of a window kernel (upsampling, padding): the output window
// [out_lo, out_lo + out_n) inside the global output [0, out_global), and the input cells it
// reads [lo, hi) (empty: none) inside the input window [in_lo, in_lo + in_n).
inline void check_output_window(const char* where, int k, Index out_lo, Index out_n,
                                Index out_global, Index lo, Index hi, Index in_lo, Index in_n) {
  TESSERA_CHECK(out_lo >= 0 && out_lo + out_n <= out_global,
                where << ": dim " << k << ": output window [" << out_lo << ", " << out_lo + out_n
                      << ") outside the global output [0, " << out_global << ")");
  TESSERA_CHECK(lo >= hi || (in_lo <= lo && hi <= in_lo + in_n),
                where << ": dim " << k << ": output window [" << out_lo << ", " << out_lo + out_n
                      << ") reads input cells [" << lo << ", " << hi
                      << ") but the input window holds [" << in_lo << ", " << in_lo + in_n << ")");
}

// Strides xs of (n, c, d0, d1, d2) from a descriptor's x_strides over (n, c, user dims):
// all zero means contiguous over c and the normalized extents `in`. Unused dims get 0.
inline void normalized_x_strides(const Index x_strides[5], int nd, Index c, const Index in[3],
                                 Index xs[5]) {
  const int off = 3 - nd;
  bool contiguous = true;
  for (int k = 0; k < 2 + nd; ++k) contiguous = contiguous && x_strides[k] == 0;
  for (int k = 0; k < 5; ++k) xs[k] = 0;
  if (contiguous) {
    xs[4] = 1;
    for (int n = 3; n >= 0; --n) xs[n] = xs[n + 1] * (n >= 1 ? in[n - 1] : c);
    for (int n = 2; n < 2 + off; ++n) xs[n] = 0;
  } else {
    xs[0] = x_strides[0];
    xs[1] = x_strides[1];
    for (int k = 0; k < nd; ++k) xs[2 + off + k] = x_strides[2 + k];
  }
}

}  // namespace tessera::kernels
