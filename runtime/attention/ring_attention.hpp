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

#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {

struct RingAttentionOptions {
  int axis = 0;        // the mesh axis the sequence is sharded on
  bool causal = false;
  double scale = 0;    // 0: 1/sqrt(D)
};

class RingAttention {
 public:
  explicit RingAttention(const RingAttentionOptions& opts) : opts_(opts) {}

  // Collective over the axis. Saves what backward needs.
  ShardTensor forward(const ShardTensor& q, const ShardTensor& k, const ShardTensor& v);
  // dq, dk, dv laid out as q, k, v.
  std::array<ShardTensor, 3> backward(const ShardTensor& dout);

 private:
  RingAttentionOptions opts_;
  ShardTensor q_, k_, v_, out_;
  Tensor lse_;  // (B_local, S_local) float64
};

}  // namespace tessera
