#pragma once
// The block that travels the ring in backward (ring and zig-zag attention): k and v in their
// storage type with their accumulating gradients in the compute type. One buffer - one
// message per hop - when the two types agree; two when k and v are bf16, whose gradients
// stay float32 (summed in bf16 they would round at every hop).
#include "runtime/floor.hpp"
#include <mpi.h>

#include "runtime/tensor/tensor.hpp"

namespace tessera {

// k and v (B, S, D) of one block side by side, (2, B, S, D), so one message carries both.
Tensor pack_kv(const Tensor& k, const Tensor& v);
// Slot i of a block of slots (n, B, S, D), as a (B, S, D) view.
Tensor block_slot(const Tensor& block, int i);

class TravellingBlock {
 public:
  // kv: (2, B, S, D), k then v; the gradients start at zero, of type grad_type.
  TravellingBlock(const Tensor& kv, DType grad_type);

  const Tensor& kv() const { return kv_; }        // (2, B, S, D) in the storage type
  const Tensor& grads() const { return grads_; }  // (2, B, S, D): dk then dv
  // Sends the block to `next` and takes `prev`'s, of `rows` rows, in its place (blocking).
  void hop(MPI_Comm comm, Index rows, int next, int prev, int tag);

 private:
  void bind(const Tensor& all);  // kv_ and grads_ as the halves of one buffer
  bool one_ = true;
  Tensor all_, kv_, grads_;
};

}  // namespace tessera
