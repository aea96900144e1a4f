#include "runtime/attention/sequence_attention.hpp"

#include <sstream>

#include "kernels/attention.hpp"
#include "runtime/comm/comm_timers.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

ShardTensor moved(const ShardTensor& t, const ShardSpec& to) {
  ScopedCommTimer timer(comm_times().alltoall_s);
  return t.redistribute(to);
}

// Points the kernel at the bias in the layout it runs on (none when `bias` is undefined);
// returns the contiguous tensor, to be kept alive while the kernel runs.
Tensor with_bias(kernels::AttentionDesc& a, const ShardTensor& bias) {
  if (!bias.local().defined()) return Tensor();
  const Tensor b = converted(bias.local().contiguous(), a.type);
  a.bias = b.raw();
  a.bias_batch_stride = b.shape(0) == 1 ? 0 : b.shape(1) * b.shape(2);
  return b;
}

}  // namespace

// The bias gradient of the local kernel (its problems, its queries, every key) laid out as
// the bias.
ShardTensor SequenceAttention::bias_grad_home(const Tensor& db, const Mesh& mesh) const {
  if (chosen_ == SequenceAlgorithm::AllGather) return attention_bias_grad(bias_, q_.spec(), db);
  // All-to-all: db holds this rank's problems with the whole sequence.
  if (bias_.global_shape()[0] != 1)
    return moved(ShardTensor::unchecked(mesh, bias_w_.spec(), db), bias_.spec());
  // A broadcast bias: each rank sums its problems' share; the shares add up over the axis.
  const Index S = db.shape(1), Sk = db.shape(2);
  Tensor sum = Tensor::zeros({1, S, Sk}, db.dtype(), db.space());
  for (Index i = 0; i < db.shape(0); ++i) add_into(sum, db.view(Box({i, 0, 0}, {i + 1, S, Sk})));
  const ShardSpec pending = bias_w_.spec().with_partial({opts_.axis});
  return moved(ShardTensor::unchecked(mesh, pending, sum), bias_.spec());
}

std::string name_of(SequenceAlgorithm a) {
  switch (a) {
    case SequenceAlgorithm::Auto:
      return "auto";
    case SequenceAlgorithm::Ring:
      return "ring";
    case SequenceAlgorithm::AllToAll:
      return "all_to_all";
    case SequenceAlgorithm::AllGather:
      return "all_gather";
  }
  return "?";
}

SequenceAlgorithm sequence_algorithm_from_name(const std::string& n) {
  for (auto a : {SequenceAlgorithm::Auto, SequenceAlgorithm::Ring, SequenceAlgorithm::AllToAll,
                 SequenceAlgorithm::AllGather})
    if (n == name_of(a)) return a;
  throw Error("unknown sequence attention '" + n + "' (auto, ring, all_to_all, all_gather)");
}

SequenceAlgorithm resolve_sequence_algorithm(SequenceAlgorithm algo, const std::vector<Index>& g,
                                             bool problems_sharded, int ranks, DType dtype) {
  if (algo != SequenceAlgorithm::Auto) return algo;
  if (!problems_sharded && g[0] >= ranks) return SequenceAlgorithm::AllToAll;
  // Short sequences: one gather of the whole K and V beats P latency-bound ring hops.
  const double kv_bytes = 2.0 * static_cast<double>(g[0]) * static_cast<double>(g[1]) *
                          static_cast<double>(g[2]) * static_cast<double>(size_of(dtype));
  return kv_bytes <= kAutoAllGatherBytes ? SequenceAlgorithm::AllGather : SequenceAlgorithm::Ring;
}

SequenceAlgorithm SequenceAttention::resolve(const ShardTensor& q) const {
  TESSERA_CHECK(opts_.axis >= 0 && opts_.axis < q.mesh().ndim(),
                "sequence attention: mesh axis " << opts_.axis << " does not exist (the mesh has "
                                                 << q.mesh().ndim() << " axes)");
  return resolve_sequence_algorithm(algo_, q.global_shape(), q.spec().placement(0).sharded(),
                                    q.mesh().dim(opts_.axis), q.dtype());
}

std::string SequenceAttention::describe() const {
  std::ostringstream o;
  o << "sequence attention on mesh axis " << opts_.axis << ": " << name_of(chosen_)
    << (algo_ == SequenceAlgorithm::Auto ? " (auto)" : "") << (opts_.causal ? ", causal" : "");
  return o.str();
}

const ShardTensor& SequenceAttention::bias_grad() const {
  return chosen_ == SequenceAlgorithm::Ring ? ring_.bias_grad() : dbias_;
}

ShardTensor SequenceAttention::forward(const ShardTensor& q, const ShardTensor& k,
                                       const ShardTensor& v, const ShardTensor& bias) {
  agree_attention_options(q.mesh(), "sequence attention",
                          name_of(algo_) + ", " + options_text(opts_), agreed_);
  chosen_ = resolve(q);
  dbias_ = ShardTensor();
  if (chosen_ == SequenceAlgorithm::Ring) return ring_.forward(q, k, v, bias);
  check_sequence_inputs(q, k, v, opts_.axis);
  const bool has_bias = bias.local().defined();
  if (has_bias) check_attention_bias(bias, q, k, opts_.axis);
  bias_ = bias;
  bias_w_ = ShardTensor();
  const Mesh& mesh = q.mesh();
  q_ = q;
  k_ = k;
  v_ = v;
  Index q0 = 0;
  if (chosen_ == SequenceAlgorithm::AllToAll) {
    TESSERA_CHECK(!q.spec().placement(0).sharded(),
                  "all-to-all attention: dim 0 (batch x heads) is already sharded; use ring");
    // Sequence whole, problems split over the same axis.
    const std::vector<Placement> heads{Shard(opts_.axis), Replicate(), Replicate()};
    qw_ = moved(q, ShardSpec(q.global_shape(), heads, mesh));
    kw_ = moved(k, ShardSpec(k.global_shape(), heads, mesh));
    vw_ = moved(v, ShardSpec(v.global_shape(), heads, mesh));
    // The bias follows its problems; a broadcast one is needed whole everywhere.
    if (has_bias)
      bias_w_ = moved(
          bias,
          ShardSpec(bias.global_shape(),
                    bias.global_shape()[0] == 1 ? std::vector<Placement>(3, Replicate()) : heads,
                    mesh));
  } else {  // AllGather: K and V whole where the queries are
    qw_ = q;
    const ShardSpec whole = k.spec().with_placement(1, Replicate());
    kw_ = moved(k, whole);
    vw_ = moved(v, whole);
    q0 = q.local_box().lo[1];
    if (has_bias) bias_w_ = bias;  // this rank's query rows, every key column
  }
  // bf16 moves as bf16; the kernel runs in the compute type (float32 for bf16).
  const DType ct = compute_type(q.dtype());
  const Tensor ql = converted(qw_.local().contiguous(), ct),
               kl = converted(kw_.local().contiguous(), ct),
               vl = converted(vw_.local().contiguous(), ct);
  Tensor out = Tensor::empty(ql.shape(), ct, ql.space());
  lse_ = Tensor::empty({ql.shape(0), ql.shape(1)}, DType::f64, ql.space());
  kernels::AttentionDesc a = attention_desc(ql, kl, q0, 0, opts_);
  const Tensor bl = with_bias(a, bias_w_);
  kernels::attention_forward(ql.device(), a, ql.raw(), kl.raw(), vl.raw(), out.raw(),
                             lse_.data<double>());
  out_w_ = ShardTensor::unchecked(mesh, qw_.spec(), out);  // compute type, for backward
  const ShardTensor res = ShardTensor::unchecked(mesh, qw_.spec(), converted(out, q.dtype()));
  return chosen_ == SequenceAlgorithm::AllToAll ? moved(res, q.spec()) : res;
}

void SequenceAttention::release_saved() {
  ring_.release_saved();
  q_ = k_ = v_ = qw_ = kw_ = vw_ = out_w_ = bias_ = bias_w_ = ShardTensor();
  lse_ = Tensor();
}

std::array<ShardTensor, 3> SequenceAttention::backward(const ShardTensor& dout) {
  if (chosen_ == SequenceAlgorithm::Ring) return ring_.backward(dout);
  TESSERA_CHECK(lse_.defined(), "sequence attention: backward before forward");
  TESSERA_CHECK(dout.spec() == q_.spec(), "sequence attention: the output gradient is "
                                              << dout.spec().str() << ", forward gave "
                                              << q_.spec().str());
  const Mesh& mesh = q_.mesh();
  const ShardTensor gw = chosen_ == SequenceAlgorithm::AllToAll ? moved(dout, qw_.spec()) : dout;
  const DType ct = compute_type(q_.dtype());
  const Tensor ql = converted(qw_.local().contiguous(), ct),
               kl = converted(kw_.local().contiguous(), ct),
               vl = converted(vw_.local().contiguous(), ct),
               go = converted(gw.local().contiguous(), ct), ol = out_w_.local().contiguous();
  const Index q0 = chosen_ == SequenceAlgorithm::AllGather ? q_.local_box().lo[1] : 0;
  Tensor dq = Tensor::empty(ql.shape(), ct, ql.space());
  Tensor dk = Tensor::empty(kl.shape(), ct, kl.space());
  Tensor dv = Tensor::empty(vl.shape(), ct, vl.space());
  kernels::AttentionDesc a = attention_desc(ql, kl, q0, 0, opts_);
  const Tensor bl = with_bias(a, bias_w_);
  const bool has_bias = bl.defined();
  // The bias gradient per (problem, query, key) of the local kernel, not broadcast.
  Tensor db =
      has_bias ? Tensor::empty({ql.shape(0), ql.shape(1), kl.shape(1)}, ct, ql.space()) : Tensor();
  kernels::attention_backward(ql.device(), a, ql.raw(), kl.raw(), vl.raw(), ol.raw(), go.raw(),
                              lse_.data<double>(), dq.raw(), dk.raw(), dv.raw(),
                              has_bias ? db.raw() : nullptr);
  if (has_bias) dbias_ = bias_grad_home(db, mesh);
  const DType st = q_.dtype();  // the storage type the gradients are returned in
  if (chosen_ == SequenceAlgorithm::AllToAll)
    return {moved(ShardTensor::unchecked(mesh, qw_.spec(), converted(dq, st)), q_.spec()),
            moved(ShardTensor::unchecked(mesh, kw_.spec(), converted(dk, st)), k_.spec()),
            moved(ShardTensor::unchecked(mesh, vw_.spec(), converted(dv, st)), v_.spec())};
  // AllGather: each rank holds its queries' share of the whole dk, dv: a pending sum over
  // the axis, reduce-scattered back to the key blocks in the compute type.
  const std::vector<int> partial{opts_.axis};
  const ShardSpec pk = kw_.spec().with_partial(partial);
  const auto home = [&](const Tensor& g, const ShardSpec& to) {
    return ShardTensor::unchecked(
        mesh, to, converted(moved(ShardTensor::unchecked(mesh, pk, g), to).local(), st));
  };
  return {ShardTensor::unchecked(mesh, q_.spec(), converted(dq, st)), home(dk, k_.spec()),
          home(dv, v_.spec())};
}

}  // namespace tessera
