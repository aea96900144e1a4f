#include "runtime/attention/ring_attention.hpp"

#include <numeric>
#include <sstream>

#include "kernels/attention.hpp"
#include "runtime/attention/ring_hop.hpp"
#include "runtime/attention/travelling_block.hpp"
#include "runtime/comm/fault_inject.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/comm_timers.hpp"
#include "runtime/comm/mpi_datatype.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/comm/mpi_types.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {

void check_sequence_inputs(const ShardTensor& q, const ShardTensor& k, const ShardTensor& v,
                           int axis) {
  TESSERA_CHECK(axis >= 0 && axis < q.mesh().ndim(), "sequence attention: mesh axis "
                                                         << axis << " does not exist (the mesh has "
                                                         << q.mesh().ndim() << " axes)");
  for (const ShardTensor* t : {&q, &k, &v}) {
    TESSERA_CHECK(t->spec().ndim() == 3,
                  "ring attention: tensors are (B, S, D), got " << shape_str(t->global_shape()));
    TESSERA_CHECK(!t->spec().has_partial(), "ring attention: a pending sum in " << t->spec().str());
    TESSERA_CHECK(t->spec().placement(1).axis == axis && !t->spec().placement(2).sharded(),
                  "ring attention: the sequence (dim 1) must be sharded on mesh axis "
                      << axis << " and D whole, got " << t->spec().str());
    TESSERA_CHECK(t->dtype() == q.dtype() && t->local().space() == q.local().space(),
                  "ring attention: q, k and v differ in type or memory space");
  }
  TESSERA_CHECK(k.global_shape() == v.global_shape(),
                "ring attention: k " << shape_str(k.global_shape()) << " and v "
                                     << shape_str(v.global_shape())
                                     << " differ in shape (batch, keys and head dim must agree)");
  TESSERA_CHECK(k.spec() == v.spec(), "ring attention: k and v are laid out differently ("
                                          << k.spec().str() << ", " << v.spec().str() << ")");
  TESSERA_CHECK(
      q.global_shape()[0] == k.global_shape()[0] && q.global_shape()[2] == k.global_shape()[2] &&
          q.spec().placement(0) == k.spec().placement(0) && q.spec().sizes(0) == k.spec().sizes(0),
      "ring attention: q " << q.spec().str() << " and k " << k.spec().str()
                           << " differ in batch (its split too) or head dim");
}

namespace {

// Where block c of the sequence starts (global row) and its length.
struct Blocks {
  std::vector<Index> size, start;
  explicit Blocks(const std::vector<Index>& sizes) : size(sizes), start(sizes.size(), 0) {
    std::partial_sum(sizes.begin(), sizes.end() - 1, start.begin() + 1);
  }
};

}  // namespace

namespace {

// Columns [k0, k0 + sk) of this rank's bias rows, contiguous, and the descriptor fields.
Tensor bias_block(const Tensor& bias, Index k0, Index sk, kernels::AttentionDesc& a) {
  const Index bb = bias.shape(0), sq = bias.shape(1);
  Tensor block = converted(bias.view(Box({0, 0, k0}, {bb, sq, k0 + sk})).contiguous(), a.type);
  a.bias = block.raw();
  a.bias_batch_stride = bb == 1 ? 0 : sq * sk;
  return block;
}

}  // namespace

// The bias's checks: (1 or B, S_q, S_k) rows as q's, columns whole, batch as q's or one.
void check_attention_bias(const ShardTensor& bias, const ShardTensor& q, const ShardTensor& k,
                          int axis) {
  const ShardSpec& b = bias.spec();
  TESSERA_CHECK(b.ndim() == 3 && !b.has_partial(),
                "attention: the bias is (1 or B, S_q, S_k), got " << b.str());
  const Index B = q.global_shape()[0];
  TESSERA_CHECK(
      (b.global_shape()[0] == B || b.global_shape()[0] == 1) &&
          b.global_shape()[1] == q.global_shape()[1] && b.global_shape()[2] == k.global_shape()[1],
      "attention: bias " << shape_str(b.global_shape()) << " for q " << shape_str(q.global_shape())
                         << " and k " << shape_str(k.global_shape()));
  TESSERA_CHECK(
      b.placement(1).axis == axis && b.sizes(1) == q.spec().sizes(1) && !b.placement(2).sharded(),
      "attention: the bias's rows must be sharded as q's and its columns whole, got " << b.str());
  TESSERA_CHECK(
      b.global_shape()[0] == 1
          ? !b.placement(0).sharded()
          : b.placement(0) == q.spec().placement(0) && b.sizes(0) == q.spec().sizes(0),
      "attention: the bias's batch is laid out as " << b.str() << ", q as " << q.spec().str());
  TESSERA_CHECK(bias.dtype() == q.dtype() && bias.local().space() == q.local().space(),
                "attention: the bias differs from q in type or memory space");
}

ShardTensor attention_bias_grad(const ShardTensor& bias, const ShardSpec& q_spec,
                                const Tensor& dbias) {
  const ShardSpec& bs = bias.spec();
  if (bias.global_shape()[0] != 1) return ShardTensor::unchecked(bias.mesh(), bs, dbias);
  // A broadcast bias: the sum over the batch, pending over the axis sharding it.
  const Index rows = dbias.shape(1), cols = dbias.shape(2);
  Tensor sum = Tensor::zeros({1, rows, cols}, dbias.dtype(), dbias.space());
  for (Index i = 0; i < dbias.shape(0); ++i)
    add_into(sum, dbias.view(Box({i, 0, 0}, {i + 1, rows, cols})));
  const int batch_axis = q_spec.placement(0).axis;
  return ShardTensor::unchecked(bias.mesh(), batch_axis >= 0 ? bs.with_partial({batch_axis}) : bs,
                                sum);
}

kernels::AttentionDesc attention_desc(const Tensor& q, const Tensor& k, Index q0, Index k0,
                                      const RingAttentionOptions& o) {
  kernels::AttentionDesc a;
  a.batch = q.shape(0);
  a.sq = q.shape(1);
  a.sk = k.shape(1);
  a.d = q.shape(2);
  a.causal = o.causal;
  a.q_offset = q0;
  a.k_offset = k0;
  a.scale = o.scale;
  a.type = q.dtype();
  return a;
}

std::string options_text(const RingAttentionOptions& o) {
  std::ostringstream s;
  s.precision(17);
  s << "axis " << o.axis << (o.causal ? ", causal" : ", not causal") << ", scale " << o.scale;
  return s.str();
}

void agree_attention_options(const Mesh& mesh, const char* layer, const std::string& options,
                             bool& agreed) {
  if (agreed) return;
  collective_check(mesh.comm(), true, "", layer, "the options", options);
  agreed = true;
}

ShardTensor RingAttention::forward(const ShardTensor& q, const ShardTensor& k, const ShardTensor& v,
                                   const ShardTensor& bias) {
  agree_attention_options(q.mesh(), "ring attention", options_text(opts_), agreed_);
  check_sequence_inputs(q, k, v, opts_.axis);
  const bool has_bias = bias.local().defined();
  if (has_bias) check_attention_bias(bias, q, k, opts_.axis);
  const Tensor bl = has_bias ? bias.local() : Tensor();
  const Mesh& mesh = q.mesh();
  const MPI_Comm comm = mesh.axis_comm(opts_.axis);
  const int P = mesh.dim(opts_.axis), me = mesh.coords()[static_cast<std::size_t>(opts_.axis)];
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  const Blocks qb(q.spec().sizes(1)), kb(k.spec().sizes(1));
  // bf16 blocks travel as they are; the kernel, the partial outputs and their merge run in
  // float32 (compute_type).
  const DType ct = compute_type(q.dtype());
  const Tensor ql = converted(q.local().contiguous(), ct);
  Tensor out = Tensor::zeros(ql.shape(), ct, ql.space());
  Tensor lse = Tensor::empty({ql.shape(0), ql.shape(1)}, DType::f64, ql.space());
  Tensor part = Tensor::empty(ql.shape(), ct, ql.space());
  Tensor part_lse = Tensor::empty(lse.shape(), DType::f64, ql.space());
  Tensor cur = pack_kv(k.local().contiguous(), v.local().contiguous());
  for (int step = 0; step < P; ++step) {
    const int owner = (me - step + P) % P;  // whose key block is here now
    RingHop hop;
    Tensor nxt;
    if (step + 1 < P) {  // post the next hop before computing on this block
      const int incoming = (me - step - 1 + 2 * P) % P;
      nxt = Tensor::empty(
          {2, cur.shape(1), kb.size[static_cast<std::size_t>(incoming)], cur.shape(3)}, cur.dtype(),
          cur.space());
      hop.start(comm, cur, nxt, next, prev, step);
    }
    // Tests: an error on one rank while the next block is on its way into `nxt`.
    if (step + 1 < P && fault_point("ring_block"))
      throw Error("injected fault in a ring attention block (TESSERA_FAULT_INJECT)");
    const Tensor kk = converted(block_slot(cur, 0), ct), vv = converted(block_slot(cur, 1), ct);
    auto a = attention_desc(ql, kk, qb.start[static_cast<std::size_t>(me)],
                            kb.start[static_cast<std::size_t>(owner)], opts_);
    Tensor bblock;
    if (has_bias) bblock = bias_block(bl, a.k_offset, a.sk, a);
    if (step == 0) {
      kernels::attention_forward(ql.device(), a, ql.raw(), kk.raw(), vv.raw(), out.raw(),
                                 lse.data<double>());
    } else {
      kernels::attention_forward(ql.device(), a, ql.raw(), kk.raw(), vv.raw(), part.raw(),
                                 part_lse.data<double>());
      kernels::attention_merge(ql.device(), ct, a.batch, a.sq, a.d, out.raw(), lse.data<double>(),
                               part.raw(), part_lse.data<double>());
    }
    if (step + 1 < P) {
      hop.wait();
      cur = nxt;
    }
  }
  q_ = q;
  k_ = k;
  v_ = v;
  bias_ = bias;
  dbias_ = ShardTensor();
  out_ = ShardTensor::unchecked(mesh, q.spec(), out);  // in the compute type, for backward
  lse_ = lse;
  return ShardTensor::unchecked(mesh, q.spec(), converted(out, q.dtype()));
}

void RingAttention::release_saved() {
  q_ = k_ = v_ = out_ = bias_ = ShardTensor();
  lse_ = Tensor();
}

std::array<ShardTensor, 3> RingAttention::backward(const ShardTensor& dout) {
  TESSERA_CHECK(lse_.defined(), "ring attention: backward before forward");
  TESSERA_CHECK(dout.spec() == q_.spec() && dout.dtype() == q_.dtype(),
                "ring attention: the output gradient is " << dout.spec().str() << ", forward gave "
                                                          << q_.spec().str());
  const Mesh& mesh = q_.mesh();
  const MPI_Comm comm = mesh.axis_comm(opts_.axis);
  const int P = mesh.dim(opts_.axis), me = mesh.coords()[static_cast<std::size_t>(opts_.axis)];
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  const Blocks qb(q_.spec().sizes(1)), kb(k_.spec().sizes(1));
  const DType ct = compute_type(q_.dtype());
  const Tensor ql = converted(q_.local().contiguous(), ct),
               go = converted(dout.local().contiguous(), ct), ol = out_.local().contiguous();
  Tensor dq = Tensor::zeros(ql.shape(), ct, ql.space());
  Tensor dq_part = Tensor::empty(ql.shape(), ct, ql.space());
  const bool has_bias = bias_.local().defined();
  const Tensor bl = has_bias ? bias_.local() : Tensor();
  // The bias gradient per (batch row, query, key), not broadcast: (B_local, S_q local, S_k).
  Tensor dbias =
      has_bias ? Tensor::zeros({ql.shape(0), ql.shape(1), bl.shape(2)}, ct, ql.space()) : Tensor();
  // The travelling block: k, v and their accumulating gradients (travelling_block.hpp).
  TravellingBlock block(pack_kv(k_.local().contiguous(), v_.local().contiguous()), ct);
  for (int step = 0; step < P; ++step) {
    const int owner = (me - step + P) % P;
    const Tensor kk = converted(block_slot(block.kv(), 0), ct),
                 vv = converted(block_slot(block.kv(), 1), ct), dk = block_slot(block.grads(), 0),
                 dv = block_slot(block.grads(), 1);
    auto a = attention_desc(ql, kk, qb.start[static_cast<std::size_t>(me)],
                            kb.start[static_cast<std::size_t>(owner)], opts_);
    Tensor bblock, db_part;
    if (has_bias) {
      bblock = bias_block(bl, a.k_offset, a.sk, a);
      db_part = Tensor::empty({a.batch, a.sq, a.sk}, ct, ql.space());
    }
    Tensor dk_part = Tensor::empty(kk.shape(), ct, kk.space());
    Tensor dv_part = Tensor::empty(vv.shape(), ct, vv.space());
    kernels::attention_backward(ql.device(), a, ql.raw(), kk.raw(), vv.raw(), ol.raw(), go.raw(),
                                lse_.data<double>(), dq_part.raw(), dk_part.raw(), dv_part.raw(),
                                has_bias ? db_part.raw() : nullptr);
    if (has_bias)
      dbias.view(Box({0, 0, a.k_offset}, {a.batch, a.sq, a.k_offset + a.sk})).copy_from(db_part);
    add_into(dq, dq_part);
    add_into(dk, dk_part);
    add_into(dv, dv_part);
    // The block moves on (after the last step it arrives home with complete gradients).
    if (P > 1)
      block.hop(comm, kb.size[static_cast<std::size_t>((me - step - 1 + 2 * P) % P)], next, prev,
                1000 + 2 * step);
  }
  // A bf16 bias's gradient stays float32: it may be a pending sum, which MPI adds in float32.
  if (has_bias) dbias_ = attention_bias_grad(bias_, q_.spec(), dbias);
  auto home = [&](int i) {
    return converted(block_slot(block.grads(), i), k_.dtype()).contiguous();
  };
  return {ShardTensor::unchecked(mesh, q_.spec(), converted(dq, q_.dtype())),
          ShardTensor::unchecked(mesh, k_.spec(), home(0)),
          ShardTensor::unchecked(mesh, v_.spec(), home(1))};
}

}  // namespace tessera
