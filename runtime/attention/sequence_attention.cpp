#include "runtime/attention/sequence_attention.hpp"

#include <sstream>

#include "kernels/attention.hpp"
#include "runtime/comm/comm_timers.hpp"

namespace tessera {
namespace {

ShardTensor moved(const ShardTensor& t, const ShardSpec& to) {
  ScopedCommTimer timer(comm_times().alltoall_s);
  return t.redistribute(to);
}

}  // namespace

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
  return resolve_sequence_algorithm(algo_, q.global_shape(), q.spec().placement(0).sharded(),
                                    q.mesh().dim(opts_.axis), q.dtype());
}

std::string SequenceAttention::describe() const {
  std::ostringstream o;
  o << "sequence attention on mesh axis " << opts_.axis << ": " << name_of(chosen_)
    << (algo_ == SequenceAlgorithm::Auto ? " (auto)" : "") << (opts_.causal ? ", causal" : "");
  return o.str();
}

ShardTensor SequenceAttention::forward(const ShardTensor& q, const ShardTensor& k,
                                       const ShardTensor& v) {
  chosen_ = resolve(q);
  if (chosen_ == SequenceAlgorithm::Ring) return ring_.forward(q, k, v);
  check_sequence_inputs(q, k, v, opts_.axis);
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
  } else {  // AllGather: K and V whole where the queries are
    qw_ = q;
    const ShardSpec whole = k.spec().with_placement(1, Replicate());
    kw_ = moved(k, whole);
    vw_ = moved(v, whole);
    q0 = q.local_box().lo[1];
  }
  const Tensor ql = qw_.local().contiguous(), kl = kw_.local().contiguous(),
               vl = vw_.local().contiguous();
  Tensor out = Tensor::empty(ql.shape(), ql.dtype(), ql.space());
  lse_ = Tensor::empty({ql.shape(0), ql.shape(1)}, DType::f64, ql.space());
  kernels::attention_forward(ql.device(), attention_desc(ql, kl, q0, 0, opts_), ql.raw(), kl.raw(),
                             vl.raw(), out.raw(), lse_.data<double>());
  out_w_ = ShardTensor::unchecked(mesh, qw_.spec(), out);
  return chosen_ == SequenceAlgorithm::AllToAll ? moved(out_w_, q.spec()) : out_w_;
}

std::array<ShardTensor, 3> SequenceAttention::backward(const ShardTensor& dout) {
  if (chosen_ == SequenceAlgorithm::Ring) return ring_.backward(dout);
  TESSERA_CHECK(lse_.defined(), "sequence attention: backward before forward");
  TESSERA_CHECK(dout.spec() == q_.spec(), "sequence attention: the output gradient is "
                                              << dout.spec().str() << ", forward gave "
                                              << q_.spec().str());
  const Mesh& mesh = q_.mesh();
  const ShardTensor gw = chosen_ == SequenceAlgorithm::AllToAll ? moved(dout, qw_.spec()) : dout;
  const Tensor ql = qw_.local().contiguous(), kl = kw_.local().contiguous(),
               vl = vw_.local().contiguous(), go = gw.local().contiguous(),
               ol = out_w_.local().contiguous();
  const Index q0 = chosen_ == SequenceAlgorithm::AllGather ? q_.local_box().lo[1] : 0;
  Tensor dq = Tensor::empty(ql.shape(), ql.dtype(), ql.space());
  Tensor dk = Tensor::empty(kl.shape(), kl.dtype(), kl.space());
  Tensor dv = Tensor::empty(vl.shape(), vl.dtype(), vl.space());
  kernels::attention_backward(ql.device(), attention_desc(ql, kl, q0, 0, opts_), ql.raw(), kl.raw(),
                              vl.raw(), ol.raw(), go.raw(), lse_.data<double>(), dq.raw(), dk.raw(),
                              dv.raw());
  if (chosen_ == SequenceAlgorithm::AllToAll)
    return {moved(ShardTensor::unchecked(mesh, qw_.spec(), dq), q_.spec()),
            moved(ShardTensor::unchecked(mesh, kw_.spec(), dk), k_.spec()),
            moved(ShardTensor::unchecked(mesh, vw_.spec(), dv), v_.spec())};
  // AllGather: each rank holds its queries' share of the whole dk, dv: a pending sum over
  // the axis, reduce-scattered back to the key blocks.
  const std::vector<int> partial{opts_.axis};
  const ShardSpec pk = kw_.spec().with_partial(partial);
  return {ShardTensor::unchecked(mesh, q_.spec(), dq),
          moved(ShardTensor::unchecked(mesh, pk, dk), k_.spec()),
          moved(ShardTensor::unchecked(mesh, pk, dv), v_.spec())};
}

}  // namespace tessera
