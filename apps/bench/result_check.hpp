#pragma once
// Untimed checks of what the benchmark cases time: a case that computed a wrong answer
// must not report a speed. Relative errors are max |a - b| / max |b| (zero scale: the
// plain difference).
#include <cstddef>

#include "kernels/attention.hpp"
#include "runtime/tensor/shard_spec.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::bench {

// The error reported for a result that is NaN or infinite (finite, so JSON keeps it).
inline constexpr double kWorstError = 1e300;

double rel_max_diff(const float* a, const float* b, std::size_t n);
// Two float32 host tensors of one shape (a shape mismatch is an Error).
double rel_max_diff(const Tensor& a, const Tensor& b);

// A float32 attention's results (host or device, copied to the host) against float64 sums
// of the same inputs, without the S^2 cost of a full reference: `rows` query rows per
// problem (out, lse, dq; the first, the last and rows between) and as many key rows (dk and
// dv, summed over all queries from the kernel's lse and out of every row, of which the query
// rows check `rows`). Causal masking as a.causal says (offsets 0). The largest error over
// the five results, each relative to the largest sum of its terms' magnitudes (the bound of
// float32 rounding: dq and dk are sums that cancel, since the softmax gradient of a row sums
// to zero); kWorstError for a NaN or infinite result.
double sampled_attention_error(const kernels::AttentionDesc& a, const float* q, const float* k,
                               const float* v, const float* out, const double* lse,
                               const float* dout, const float* dq, const float* dk, const float* dv,
                               int rows);

// Element i (row-major global index) of the benchmarks' pseudo-random float32 tensors, in
// [-1, 1]: a hash, so any rank computes any element of a sharded tensor.
float hashed_value(std::uint64_t i, unsigned seed);
// The block a rank at mesh `coords` holds of such a tensor laid out by spec.
Tensor hashed_block(const ShardSpec& spec, const std::vector<int>& coords, unsigned seed);

// A convolution (stride 1, no dilation, one group, output the input's shape: padding
// (kernel - 1) / 2 on each side) of a sharded (1, C, spatial...) float32 tensor: its output
// y and input gradient dx on one rank, against float64 sums over the global input
// (hashed_value with x_seed) and output gradient (dy_seed), at sampled points of the rank's
// block: on its faces (first two and last two planes of every dim, where the halo counts),
// the domain's border and random positions between, crossed over the dims. The largest
// relative error of the two.
double sampled_conv_error(const ShardSpec& spec, const std::vector<int>& coords,
                          const Tensor& weight, const Tensor& bias, unsigned x_seed,
                          unsigned dy_seed, const Tensor& y, const Tensor& dx);

}  // namespace tessera::bench
