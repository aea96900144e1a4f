#pragma once
// SequenceAttention: exact attention over a sequence sharded on one mesh axis by one of
// three algorithms, chosen by name or automatically, and printable:
//  - Ring: key/value blocks travel the ring (runtime/attention/ring_attention.hpp); memory
//    O(S/P) per rank, moves each K/V block through every rank;
//  - AllToAll (DeepSpeed-Ulysses): one redistribution makes the sequence whole and splits the
//    independent (batch x head) problems instead, full local attention, and back; moves
//    ~4/P of the tensors per rank; needs at least one problem per rank to be useful (uneven
//    counts are fine);
//  - AllGather: every rank gathers K and V whole (short sequences); backward reduce-scatters
//    their gradients.
// Auto, by size: AllToAll where the problems (dim 0, unsharded) number at least the ranks of
// the axis; else AllGather where the whole K and V take at most kAutoAllGatherBytes (short
// sequences, where P ring hops would be latency-bound); else Ring.
#include "runtime/floor.hpp"
#include <array>
#include <string>

#include "runtime/attention/ring_attention.hpp"

namespace tessera {

enum class SequenceAlgorithm { Auto, Ring, AllToAll, AllGather };
inline constexpr double kAutoAllGatherBytes = 1 << 20;
std::string name_of(SequenceAlgorithm a);
SequenceAlgorithm sequence_algorithm_from_name(const std::string& name);  // ring | all_to_all | ...

// The algorithm Auto resolves to for (batch x heads, S, D) blocks of `dtype` whose dim 0 is
// (not) sharded, the sequence over `ranks` ranks; a named algorithm stays itself.
SequenceAlgorithm resolve_sequence_algorithm(SequenceAlgorithm algo,
                                             const std::vector<Index>& global_shape,
                                             bool problems_sharded, int ranks, DType dtype);

class SequenceAttention {
 public:
  SequenceAttention(const RingAttentionOptions& opts,
                    SequenceAlgorithm algo = SequenceAlgorithm::Auto)
      : opts_(opts), algo_(algo), ring_(opts) {}

  // An optional additive bias (a key-dependent mask), as RingAttention takes it: (1 or B,
  // S, S), rows sharded as q's, columns whole. The ring slices it per key block; all-gather
  // uses its rows as they are; all-to-all moves it with the problems (a broadcast bias is
  // gathered whole).
  ShardTensor forward(const ShardTensor& q, const ShardTensor& k, const ShardTensor& v,
                      const ShardTensor& bias = {});
  std::array<ShardTensor, 3> backward(const ShardTensor& dout);
  // After backward with a bias: its gradient, laid out as the bias (a broadcast bias's is a
  // pending sum over the axis that shards the batch, if any).
  const ShardTensor& bias_grad() const;
  // Drops what forward saved (not the bias gradient of the last backward).
  void release_saved();
  // The algorithm the last forward ran (Auto resolved).
  SequenceAlgorithm chosen() const { return chosen_; }
  std::string describe() const;

 private:
  SequenceAlgorithm resolve(const ShardTensor& q) const;
  ShardTensor bias_grad_home(const Tensor& db, const Mesh& mesh) const;

  RingAttentionOptions opts_;
  SequenceAlgorithm algo_, chosen_ = SequenceAlgorithm::Auto;
  bool agreed_ = false;
  RingAttention ring_;
  // Saved by the gather algorithms: inputs in the layout the local kernel ran on.
  ShardTensor q_, k_, v_, qw_, kw_, vw_, out_w_, bias_, bias_w_, dbias_;
  Tensor lse_;
};

}  // namespace tessera
