#pragma once
// RingAttention: exact attention over a sequence sharded on one mesh axis (ring attention,
// Liu et al.). q, k, v are (B, S, D) ShardTensors (B = batch x heads) with S sharded over
// the axis in blocks of any sizes (uneven, length 1 and empty blocks included); B may be
// sharded over another axis. Each rank keeps its queries; the key/value blocks travel the
// ring, one hop per step with non-blocking sends of the next block posted before the current
// block is computed (double buffering), and the partial outputs merge by log-sum-exp
// (kernels/attention.hpp). Backward recomputes each block's probabilities from the saved
// row LSE; the key/value gradients travel with their blocks and arrive home complete after
// one full turn. Causal masking uses global positions, so every block pair masks as the
// whole sequence would.
#include "runtime/floor.hpp"
#include <array>

#include "kernels/attention.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {

// q, k, v as sequence attention takes them: (B, S, D), S sharded on `axis`, D whole, k and
// v alike, q and k agreeing in B and D. Throws naming what differs.
void check_sequence_inputs(const ShardTensor& q, const ShardTensor& k, const ShardTensor& v,
                           int axis);

struct RingAttentionOptions {
  int axis = 0;  // the mesh axis the sequence is sharded on
  bool causal = false;
  double scale = 0;  // 0: 1/sqrt(D)
};

// The local kernel's description of queries q (B, sq, D) against keys k (B, sk, D) whose
// first rows sit at global positions q0 and k0.
kernels::AttentionDesc attention_desc(const Tensor& q, const Tensor& k, Index q0, Index k0,
                                      const RingAttentionOptions& o);

// The checks of an additive bias (a key-dependent mask: -inf entries) for attention over
// q's sequence axis `axis`: (1 or B, S_q, S_k), its rows sharded as q's, its columns whole,
// its batch as q's or one (broadcast).
void check_attention_bias(const ShardTensor& bias, const ShardTensor& q, const ShardTensor& k,
                          int axis);
// The bias's gradient laid out as the bias, from dbias (q's local batch, the bias's local
// rows, S_k): a broadcast bias's is the sum over the batch, pending over the axis that
// shards the batch (if any).
ShardTensor attention_bias_grad(const ShardTensor& bias, const ShardSpec& q_spec,
                                const Tensor& dbias);

// Once per layer object, at its first forward (`agreed` remembers it): the options every
// rank built the layer with must be equal across the mesh (one all-reduce): another
// algorithm, axis or scale would run other transfers (a hang), another causal flag another
// function (a wrong answer). Refused on every rank, naming what differs.
void agree_attention_options(const Mesh& mesh, const char* layer, const std::string& options,
                             bool& agreed);
std::string options_text(const RingAttentionOptions& o);

class RingAttention {
 public:
  explicit RingAttention(const RingAttentionOptions& opts) : opts_(opts) {}

  // Collective over the axis. Saves what backward needs. An optional additive bias (a
  // key-dependent mask: -inf entries) of (1 or B, S, S): its rows sharded as q's, its columns
  // whole (each step takes the visiting key block's columns), the batch as q's or broadcast.
  ShardTensor forward(const ShardTensor& q, const ShardTensor& k, const ShardTensor& v,
                      const ShardTensor& bias = {});
  // dq, dk, dv laid out as q, k, v.
  std::array<ShardTensor, 3> backward(const ShardTensor& dout);
  // After backward with a bias: its gradient, laid out as the bias (a broadcast bias's
  // gradient is a pending sum over the axis that shards the batch, if any).
  const ShardTensor& bias_grad() const { return dbias_; }
  // Drops what forward saved (not the bias gradient of the last backward).
  void release_saved();

 private:
  RingAttentionOptions opts_;
  bool agreed_ = false;
  ShardTensor q_, k_, v_, out_, bias_, dbias_;
  Tensor lse_;  // (B_local, S_local) float64
};

}  // namespace tessera
