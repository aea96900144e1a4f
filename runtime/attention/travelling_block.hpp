#pragma once
// The block that travels the ring in backward (ring and zig-zag attention): k and v in their
// storage type with their accumulating gradients in the compute type. One buffer - one
// message per hop - when the two types agree; two when k and v are bf16, whose gradients
// stay float32 (summed in bf16 they would round at every hop).
#include "runtime/floor.hpp"
#include <mpi.h>

#include "runtime/tensor/tensor.hpp"

namespace tessera {

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
