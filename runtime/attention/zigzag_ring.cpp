#include "runtime/attention/zigzag_ring.hpp"

#include <algorithm>
#include <limits>

#include "decomp/partition.hpp"
#include "kernels/attention.hpp"
#include "kernels/strided_copy.hpp"
#include "runtime/attention/ring_hop.hpp"
#include "runtime/attention/travelling_block.hpp"
#include "runtime/comm/comm_timers.hpp"
#include "runtime/comm/mpi_datatype.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/comm/mpi_types.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

// (a, b, c) -> (b, a, c), contiguous: the rows of the sequence first, for Migration.
Tensor swap01(const Tensor& t) {
  const Tensor s = t.contiguous();
  const Index A = s.shape(0), B = s.shape(1), C = s.shape(2);
  Tensor out = Tensor::empty({B, A, C}, s.dtype(), s.space());
  kernels::StridedCopy c;
  c.ndim = 3;  // over (b, a, c)
  const Index shape[3] = {B, A, C}, src[3] = {C, B * C, 1}, dst[3] = {A * C, C, 1};
  for (int i = 0; i < 3; ++i)
    c.shape[i] = shape[i], c.src_stride[i] = src[i], c.dst_stride[i] = dst[i];
  kernels::strided_copy(s.device(), out.raw(), s.raw(), kernels::simplify(c), s.elem_size());
  return out;
}

// The 2P chunks of the sequence: start of each (2P + 1 entries).
std::vector<Index> chunk_starts(Index S, int P) {
  std::vector<Index> c{0};
  for (Index n : balanced_sizes(S, 2 * P)) c.push_back(c.back() + n);
  return c;
}

// The two chunks of rank r: r and 2P-1-r.
std::array<int, 2> chunks_of(int r, int P) {
  return {r, 2 * P - 1 - r};
}

// Rows [r0, r1) of dim 1 of (B, S, D), contiguous.
Tensor rows(const Tensor& t, Index r0, Index r1) {
  return t.view(Box({0, r0, 0}, {t.shape(0), r1, t.shape(2)})).contiguous();
}

}  // namespace

ZigZagRingAttention::ZigZagRingAttention(const RingAttentionOptions& opts) : opts_(opts) {
  TESSERA_CHECK(opts.causal, "zig-zag ring attention balances causal attention: set causal");
}

ShardTensor ZigZagRingAttention::forward(const ShardTensor& q, const ShardTensor& k,
                                         const ShardTensor& v) {
  agree_attention_options(q.mesh(), "zig-zag ring attention", options_text(opts_), agreed_);
  check_sequence_inputs(q, k, v, opts_.axis);
  TESSERA_CHECK(
      q.spec() == k.spec() && q.local().space() == MemSpace::Host,
      "zig-zag ring attention needs q, k and v laid out alike, on the host (self-attention)");
  const Mesh& mesh = q.mesh();
  const MPI_Comm comm = mesh.axis_comm(opts_.axis);
  const int P = mesh.dim(opts_.axis), me = mesh.coords()[static_cast<std::size_t>(opts_.axis)];
  const Index S = q.global_shape()[1];
  const std::vector<Index> cs = chunk_starts(S, P);
  // Each local row to the rank holding its chunk; rows arrive in global order, so a rank's
  // early chunk precedes its late one.
  const Index first = q.local_box().lo[1];
  std::vector<int> dest(static_cast<std::size_t>(q.local().shape(1)));
  for (std::size_t i = 0; i < dest.size(); ++i) {
    const Index g = first + static_cast<Index>(i);
    const int c = static_cast<int>(std::upper_bound(cs.begin(), cs.end(), g) - cs.begin()) - 1;
    dest[i] = c < P ? c : 2 * P - 1 - c;
  }
  mig_ = std::make_unique<Migration>(comm, dest);
  const auto to_zigzag = [&](const ShardTensor& t) {
    return swap01(mig_->forward(swap01(t.local())));
  };
  const Tensor zq = to_zigzag(q);
  zk_ = to_zigzag(k);  // k and v travel in their storage type (bf16 too)
  zv_ = to_zigzag(v);
  const auto mine = chunks_of(me, P);
  const Index n0 =
      cs[static_cast<std::size_t>(mine[0]) + 1] - cs[static_cast<std::size_t>(mine[0])];
  // Queries, outputs and merges in the compute type (float32 for bf16).
  const DType ct = compute_type(q.dtype());
  zq_ = {converted(rows(zq, 0, n0), ct), converted(rows(zq, n0, zq.shape(1)), ct)};
  for (int a = 0; a < 2; ++a) {
    zout_[a] = Tensor::zeros(zq_[a].shape(), ct);
    zlse_[a] = Tensor::empty({zq.shape(0), zq_[a].shape(1)}, DType::f64);
    for (Index i = 0; i < zlse_[a].numel(); ++i)
      zlse_[a].data<double>()[i] = -std::numeric_limits<double>::infinity();
  }
  pairs_ = 0;
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  // The travelling block: k and v rows of one rank's two chunks.
  Tensor cur = pack_kv(zk_, zv_);
  for (int step = 0; step < P; ++step) {
    const int owner = (me - step + P) % P;
    RingHop hop;
    Tensor nxt;
    if (step + 1 < P) {
      const auto inc = chunks_of((me - step - 1 + 2 * P) % P, P);
      Index n = 0;
      for (int c : inc) n += cs[static_cast<std::size_t>(c) + 1] - cs[static_cast<std::size_t>(c)];
      nxt = Tensor::empty({2, cur.shape(1), n, cur.shape(3)}, cur.dtype());
      hop.start(comm, cur, nxt, next, prev, 2000 + step);
    }
    const auto theirs = chunks_of(owner, P);
    Index koff = 0;
    for (int kc : theirs) {
      const Index k0 = cs[static_cast<std::size_t>(kc)],
                  nk = cs[static_cast<std::size_t>(kc) + 1] - k0;
      const Box kb({0, 0, koff, 0}, {1, cur.shape(1), koff + nk, cur.shape(3)});
      const Box vb({1, 0, koff, 0}, {2, cur.shape(1), koff + nk, cur.shape(3)});
      koff += nk;
      for (int a = 0; a < 2; ++a) {
        const Index q0 = cs[static_cast<std::size_t>(mine[a])], nq = zq_[a].shape(1);
        if (nq == 0 || nk == 0 || k0 > q0 + nq - 1) continue;  // every key after every query
        ++pairs_;
        const Tensor kk =
            converted(cur.view(kb).contiguous().reshape({cur.shape(1), nk, cur.shape(3)}), ct);
        const Tensor vv =
            converted(cur.view(vb).contiguous().reshape({cur.shape(1), nk, cur.shape(3)}), ct);
        const auto d = attention_desc(zq_[a], kk, q0, k0, opts_);
        Tensor part = Tensor::empty(zq_[a].shape(), zq_[a].dtype());
        Tensor part_lse = Tensor::empty(zlse_[a].shape(), DType::f64);
        kernels::attention_forward(Device::host(), d, zq_[a].raw(), kk.raw(), vv.raw(), part.raw(),
                                   part_lse.data<double>());
        kernels::attention_merge(Device::host(), zq_[a].dtype(), d.batch, d.sq, d.d, zout_[a].raw(),
                                 zlse_[a].data<double>(), part.raw(), part_lse.data<double>());
      }
    }
    if (step + 1 < P) {
      hop.wait();
      cur = nxt;
    }
  }
  q_ = q;
  k_ = k;
  v_ = v;
  // Back to the caller's layout.
  Tensor zo = Tensor::empty(zq.shape(), ct);
  zo.view(Box({0, 0, 0}, {zq.shape(0), n0, zq.shape(2)})).copy_from(zout_[0]);
  zo.view(Box({0, n0, 0}, {zq.shape(0), zq.shape(1), zq.shape(2)})).copy_from(zout_[1]);
  return ShardTensor::unchecked(mesh, q.spec(),
                                swap01(mig_->reverse(swap01(converted(zo, q.dtype())))));
}

std::array<ShardTensor, 3> ZigZagRingAttention::backward(const ShardTensor& dout) {
  TESSERA_CHECK(mig_, "zig-zag ring attention: backward before forward");
  TESSERA_CHECK(dout.spec() == q_.spec(), "zig-zag ring attention: the output gradient is "
                                              << dout.spec().str() << ", forward gave "
                                              << q_.spec().str());
  const Mesh& mesh = q_.mesh();
  const MPI_Comm comm = mesh.axis_comm(opts_.axis);
  const int P = mesh.dim(opts_.axis), me = mesh.coords()[static_cast<std::size_t>(opts_.axis)];
  const std::vector<Index> cs = chunk_starts(q_.global_shape()[1], P);
  const auto mine = chunks_of(me, P);
  const Tensor zg = swap01(mig_->forward(swap01(dout.local())));
  const DType ct = zq_[0].dtype();
  const Index n0 = zq_[0].shape(1);
  const std::array<Tensor, 2> zgo = {converted(rows(zg, 0, n0), ct),
                                     converted(rows(zg, n0, zg.shape(1)), ct)};
  std::array<Tensor, 2> dq = {Tensor::zeros(zq_[0].shape(), ct), Tensor::zeros(zq_[1].shape(), ct)};
  // The travelling block: k, v and their accumulating gradients (travelling_block.hpp).
  const Index B = zk_.shape(0), D = zk_.shape(2);
  TravellingBlock block(pack_kv(zk_, zv_), ct);
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  for (int step = 0; step < P; ++step) {
    const int owner = (me - step + P) % P;
    const auto theirs = chunks_of(owner, P);
    Index koff = 0;
    for (int kc : theirs) {
      const Index k0 = cs[static_cast<std::size_t>(kc)],
                  nk = cs[static_cast<std::size_t>(kc) + 1] - k0;
      auto slot = [&](int i) { return Box({i, 0, koff, 0}, {i + 1, B, koff + nk, D}); };
      for (int a = 0; a < 2; ++a) {
        const Index q0 = cs[static_cast<std::size_t>(mine[a])], nq = zq_[a].shape(1);
        if (nq == 0 || nk == 0 || k0 > q0 + nq - 1) continue;
        const Tensor& kv = block.kv();
        const Tensor kk = converted(kv.view(slot(0)).contiguous().reshape({B, nk, D}), ct);
        const Tensor vv = converted(kv.view(slot(1)).contiguous().reshape({B, nk, D}), ct);
        const auto d = attention_desc(zq_[a], kk, q0, k0, opts_);
        Tensor dqp = Tensor::empty(zq_[a].shape(), ct), dkp = Tensor::empty(kk.shape(), ct),
               dvp = Tensor::empty(kk.shape(), ct);
        kernels::attention_backward(Device::host(), d, zq_[a].raw(), kk.raw(), vv.raw(),
                                    zout_[a].raw(), zgo[a].raw(), zlse_[a].data<double>(),
                                    dqp.raw(), dkp.raw(), dvp.raw());
        add_into(dq[a], dqp);
        for (const auto& [i, part] : {std::pair{0, dkp}, std::pair{1, dvp}}) {
          Tensor acc = block.grads().view(slot(i)).contiguous();
          add_into(acc, part.reshape({1, B, nk, D}));
          block.grads().view(slot(i)).copy_from(acc);
        }
      }
      koff += nk;
    }
    if (P > 1) {  // the block moves on; after the last step it is home, gradients complete
      const auto inc = chunks_of((me - step - 1 + 2 * P) % P, P);
      Index n = 0;
      for (int c : inc) n += cs[static_cast<std::size_t>(c) + 1] - cs[static_cast<std::size_t>(c)];
      block.hop(comm, n, next, prev, 3000 + 2 * step);
    }
  }
  Tensor zdq = Tensor::empty(zg.shape(), ct);
  zdq.view(Box({0, 0, 0}, {B, n0, D})).copy_from(dq[0]);
  zdq.view(Box({0, n0, 0}, {B, zg.shape(1), D})).copy_from(dq[1]);
  const auto back = [&](const Tensor& z) {
    return swap01(mig_->reverse(swap01(converted(z, q_.dtype()))));
  };
  const auto part = [&](int i) { return block_slot(block.grads(), i).contiguous(); };
  return {ShardTensor::unchecked(mesh, q_.spec(), back(zdq)),
          ShardTensor::unchecked(mesh, k_.spec(), back(part(0))),
          ShardTensor::unchecked(mesh, v_.spec(), back(part(1)))};
}

}  // namespace tessera
