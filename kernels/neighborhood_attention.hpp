#pragma once
// Neighbourhood attention (NATTEN's definition) on grids of 1 to 3 dims: each query attends
// to exactly prod(kernel) keys, kernel[d] along dim d spaced by dilation[d], the window
// centred on the query where it fits and shifted inward at the domain's border (so every
// query sees exactly k keys per dim; even kernels take k/2 keys before and k/2 - 1 after).
// With dilation, positions form dilation[d] interleaved classes and each class is a grid of
// its own. Per dim of n positions, query i, class r = i mod dil, ii = i / dil,
// n_r = #positions of class r: start = clamp(ii - k / 2, 0, n_r - k); keys (start + t) dil + r.
//
// The local kernels take the queries (N, C, local cells...) of a block and a frame of keys
// and values (N, 2 C: keys then values, frame cells...) covering every key the block's
// queries reach, both placed by their global first cell; heads of D = C / heads channels.
// Forward returns the output and each row's log-sum-exp; backward recomputes the
// probabilities from it and ADDS key and value gradients into a frame of the same shape
// (windows overlap). Host: bands of query rows, each with the frame rows it reaches (forward:
// a (sample, head, band) per thread; backward: a (sample, head) per thread). CUDA: one thread per
// query (forward, dq) and per frame cell (dk, dv: it gathers the block's queries whose windows hold
// it). No atomics and a fixed order on both.
#include "kernels/floor.hpp"
#include "decomp/dtype.hpp"
#include "decomp/host_device.hpp"
#include "decomp/index.hpp"
#include "kernels/device/device.hpp"

namespace tessera::kernels {

struct NeighborhoodDesc {
  int nd = 2;
  Index batch = 0, heads = 1, dim = 1;  // N, H, D (C = H D)
  Index extent[3] = {1, 1, 1};          // global grid extent per dim
  Index kernel[3] = {1, 1, 1};
  Index dilation[3] = {1, 1, 1};
  Index q_lo[3] = {0, 0, 0}, q_shape[3] = {1, 1, 1};  // queries' global first cell, extents
  Index f_lo[3] = {0, 0, 0}, f_shape[3] = {1, 1, 1};  // frame's global first cell, extents
  double scale = 0;                                   // 0: 1 / sqrt(D)
  DType type = DType::f32;
  Index tile_cells = 0;  // host: queries per band (rows of the first dim), 0: about 4096
};

// The first key of query i's window along one dim (keys: start + t dil, t < k); needs at
// least k positions in every class (n / dil >= k).
TESSERA_HD inline Index neighborhood_start(Index i, Index n, Index k, Index dil) {
  const Index r = i % dil, ii = i / dil, n_r = (n - r + dil - 1) / dil;
  const Index lo = ii - k / 2 > 0 ? ii - k / 2 : 0;
  const Index s = lo < n_r - k ? lo : n_r - k;
  return s * dil + r;
}

// q (N, C, q cells), kv frame (N, 2 C, frame cells) -> out (N, C, q cells), lse (N, H, q cells).
void neighborhood_attention_forward(const Device& dev, const NeighborhoodDesc& d, const void* q,
                                    const void* kv, void* out, double* lse);
// dq (N, C, q cells) overwritten; dkv (N, 2 C, frame cells) added to.
void neighborhood_attention_backward(const Device& dev, const NeighborhoodDesc& d, const void* q,
                                     const void* kv, const void* out, const void* dout,
                                     const double* lse, void* dq, void* dkv);

namespace cpu {
void neighborhood_attention_forward(const NeighborhoodDesc& d, const void* q, const void* kv,
                                    void* out, double* lse);
void neighborhood_attention_backward(const NeighborhoodDesc& d, const void* q, const void* kv,
                                     const void* out, const void* dout, const double* lse, void* dq,
                                     void* dkv);
}  // namespace cpu
namespace cuda {
void neighborhood_attention_forward(const Device& dev, const NeighborhoodDesc& d, const void* q,
                                    const void* kv, void* out, double* lse);
void neighborhood_attention_backward(const Device& dev, const NeighborhoodDesc& d, const void* q,
                                     const void* kv, const void* out, const void* dout,
                                     const double* lse, void* dq, void* dkv);
}  // namespace cuda

}  // namespace tessera::kernels
