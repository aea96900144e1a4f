#pragma once
// ZigZagRingAttention: causal ring attention with the work balanced over the ranks. With
// contiguous sequence blocks, causal attention gives rank r work on r + 1 key blocks (the
// last rank does P times the first's). Here the sequence is cut into 2P chunks and rank r
// computes for chunks r and 2P-1-r (one early, one late): every rank then has 2P + 1 chunk
// pairs with visible keys (Striped / zig-zag ring attention, as in Megatron's context
// parallelism). The rows move to that layout by one all-to-all-v and back at the end, so
// q, k, v and the results keep the caller's layout (S sharded on `axis`, any block sizes).
// Key/value blocks travel the ring as in RingAttention (the next hop posted before the
// current block is computed); chunk pairs whose keys all lie after their queries are
// skipped. Host tensors.
#include "runtime/floor.hpp"
#include <array>
#include <memory>

#include "runtime/attention/ring_attention.hpp"
#include "runtime/points/migration.hpp"

namespace tessera {

class ZigZagRingAttention {
 public:
  explicit ZigZagRingAttention(const RingAttentionOptions& opts);  // opts.causal must be set

  ShardTensor forward(const ShardTensor& q, const ShardTensor& k, const ShardTensor& v);
  std::array<ShardTensor, 3> backward(const ShardTensor& dout);
  // Chunk pairs with visible keys this rank computed in the last forward (2P + 1 when no
  // chunk is empty).
  int pairs_computed() const { return pairs_; }

 private:
  RingAttentionOptions opts_;
  bool agreed_ = false;
  std::unique_ptr<Migration> mig_;
  ShardTensor q_, k_, v_;
  std::array<Tensor, 2> zq_, zout_, zlse_;  // per own chunk (early, late), zig-zag layout
  Tensor zk_, zv_;                          // this rank's key/value rows, zig-zag layout
  int pairs_ = 0;
};

}  // namespace tessera
