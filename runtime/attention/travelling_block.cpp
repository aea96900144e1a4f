#include "runtime/attention/travelling_block.hpp"

#include "runtime/attention/ring_hop.hpp"

namespace tessera {

Tensor pack_kv(const Tensor& k, const Tensor& v) {
  const Index B = k.shape(0), S = k.shape(1), D = k.shape(2);
  Tensor kv = Tensor::empty({2, B, S, D}, k.dtype(), k.space());
  kv.view(Box({0, 0, 0, 0}, {1, B, S, D})).copy_from(k.reshape({1, B, S, D}));
  kv.view(Box({1, 0, 0, 0}, {2, B, S, D})).copy_from(v.reshape({1, B, S, D}));
  return kv;
}

Tensor block_slot(const Tensor& block, int i) {
  const Index B = block.shape(1), S = block.shape(2), D = block.shape(3);
  return block.view(Box({i, 0, 0, 0}, {i + 1, B, S, D})).reshape({B, S, D});
}

TravellingBlock::TravellingBlock(const Tensor& kv, DType grad_type)
    : one_(kv.dtype() == grad_type) {
  const Index B = kv.shape(1), S = kv.shape(2), D = kv.shape(3);
  if (one_) {
    bind(Tensor::zeros({4, B, S, D}, grad_type, kv.space()));
    kv_.copy_from(kv);
  } else {
    kv_ = kv.contiguous();
    grads_ = Tensor::zeros({2, B, S, D}, grad_type, kv.space());
  }
}

void TravellingBlock::bind(const Tensor& all) {
  const Index B = all.shape(1), S = all.shape(2), D = all.shape(3);
  all_ = all;
  kv_ = all.view(Box({0, 0, 0, 0}, {2, B, S, D}));
  grads_ = all.view(Box({2, 0, 0, 0}, {4, B, S, D}));
}

void TravellingBlock::hop(MPI_Comm comm, Index rows, int next, int prev, int tag) {
  const Index B = kv_.shape(1), D = kv_.shape(3);
  if (one_) {
    Tensor in = Tensor::empty({4, B, rows, D}, all_.dtype(), all_.space());
    RingHop h;
    h.start(comm, all_, in, next, prev, tag);
    h.wait();
    bind(in);
    return;
  }
  Tensor kv_in = Tensor::empty({2, B, rows, D}, kv_.dtype(), kv_.space()),
         grads_in = Tensor::empty({2, B, rows, D}, grads_.dtype(), grads_.space());
  RingHop h, g;
  h.start(comm, kv_, kv_in, next, prev, tag);
  g.start(comm, grads_, grads_in, next, prev, tag + 1);
  h.wait();
  g.wait();
  kv_ = kv_in;
  grads_ = grads_in;
}

}  // namespace tessera
