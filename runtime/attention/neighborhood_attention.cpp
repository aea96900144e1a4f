#include "runtime/attention/neighborhood_attention.hpp"

#include <algorithm>
#include <sstream>

#include "kernels/neighborhood_attention.hpp"
#include "runtime/nn/ops_support.hpp"

namespace tessera {

struct NeighborhoodAttention::Saved {
  Mesh mesh;
  ShardSpec h_spec, q_spec, out_spec;
  std::vector<Index> h_shape;
  Tensor q, mid, lse;
  HaloFrame kv;
  kernels::NeighborhoodDesc desc;
};

namespace {

std::vector<Index> per_dim(const std::vector<Index>& v, int nd, const char* what) {
  TESSERA_CHECK(v.size() == 1 || static_cast<int>(v.size()) == nd,
                "NeighborhoodAttention: " << what << " needs 1 or " << nd << " values");
  return v.size() == 1 ? std::vector<Index>(static_cast<std::size_t>(nd), v[0]) : v;
}

// Channels [c0, c1) of a contiguous (N, C, ...) tensor, as a contiguous tensor.
Tensor channels(const Tensor& t, Index c0, Index c1) {
  Box b = Box::from_shape(t.shape());
  b.lo[1] = c0;
  b.hi[1] = c1;
  return t.view(b).contiguous();
}

}  // namespace

NeighborhoodAttention::NeighborhoodAttention(const NeighborhoodAttentionOptions& o) : opts_(o) {
  TESSERA_CHECK(o.nd >= 1 && o.nd <= 3, "NeighborhoodAttention: nd = " << o.nd);
  TESSERA_CHECK(o.channels >= 1 && o.heads >= 1 && o.channels % o.heads == 0,
                "NeighborhoodAttention: " << o.channels << " channels in " << o.heads
                                          << " heads: heads must divide the channels");
  kernel_scalar(o.dtype, "NeighborhoodAttention");
  kernel_ = per_dim(o.kernel, o.nd, "kernel");
  dilation_ = per_dim(o.dilation, o.nd, "dilation");
  for (int d = 0; d < o.nd; ++d)
    TESSERA_CHECK(
        kernel_[static_cast<std::size_t>(d)] >= 1 && dilation_[static_cast<std::size_t>(d)] >= 1,
        "NeighborhoodAttention: kernel and dilation must be >= 1");
  qkv_ = token_linear(o.nd, o.channels, 3 * o.channels, o.dtype, o.space, o.seed, "qkv");
  out_ = token_linear(o.nd, o.channels, o.channels, o.dtype, o.space, o.seed + 1, "out");
}

NeighborhoodAttention::~NeighborhoodAttention() = default;

std::vector<Parameter*> NeighborhoodAttention::parameters() {
  return {&qkv_->weight(), qkv_->bias(), &out_->weight(), out_->bias()};
}

void NeighborhoodAttention::release_saved() {
  saved_.reset();
  qkv_->release_saved();
  out_->release_saved();
}

std::string NeighborhoodAttention::name() const {
  std::ostringstream os;
  os << "NeighborhoodAttention(C " << opts_.channels << ", heads " << opts_.heads << ", kernel";
  for (Index k : kernel_) os << ' ' << k;
  os << ", dilation";
  for (Index d : dilation_) os << ' ' << d;
  os << ")";
  return os.str();
}

ShardSpec NeighborhoodAttention::output_spec(const ShardSpec& in) const {
  check_spatial_spec(in, opts_.nd, name());
  TESSERA_CHECK(in.global_shape()[1] == opts_.channels,
                name() << ": input has " << in.global_shape()[1] << " channels");
  TESSERA_CHECK(!in.placement(1).sharded(), name() << ": the channel dim is sharded");
  for (int d = 0; d < opts_.nd; ++d) {
    const Index n = in.global_shape()[static_cast<std::size_t>(d) + 2];
    const Index k = kernel_[static_cast<std::size_t>(d)],
                dil = dilation_[static_cast<std::size_t>(d)];
    TESSERA_CHECK(n / dil >= k, name() << ": spatial dim " << d << " has " << n
                                       << " cells; a window of " << k << " keys at dilation " << dil
                                       << " needs at least " << k * dil << " (window x dilation)");
  }
  return out_->output_spec(with_channels(qkv_->output_spec(in), opts_.channels));
}

std::vector<HaloReach> NeighborhoodAttention::reach(const ShardSpec& in) const {
  // Per spatial dim: the keys the windows of queries [lo, hi) read.
  std::vector<HaloReach> reach = {no_reach(), no_reach()};
  for (int d = 0; d < opts_.nd; ++d) {
    const Index n = in.global_shape()[static_cast<std::size_t>(d) + 2];
    const Index k = kernel_[static_cast<std::size_t>(d)],
                dil = dilation_[static_cast<std::size_t>(d)];
    HaloReach r;
    r.range = [n, k, dil](Index lo, Index hi) -> std::pair<Index, Index> {
      if (lo >= hi) return {lo, lo};
      Index first = n, last = 0;
      for (Index i = lo; i < hi; ++i) {
        const Index st = kernels::neighborhood_start(i, n, k, dil);
        first = std::min(first, st);
        last = std::max(last, st + (k - 1) * dil + 1);
      }
      return {first, last};
    };
    reach.push_back(r);
  }
  return reach;
}

OpCost NeighborhoodAttention::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  const ShardSpec h = qkv_->output_spec(in), q = with_channels(h, opts_.channels);
  OpCost c = qkv_->cost(in, h, dtype);
  c += out_->cost(q, out, dtype);
  double window = 1;
  for (Index k : kernel_) window *= static_cast<double>(k);
  const double es = static_cast<double>(size_of(dtype));
  c += busiest(q, [&](const std::vector<int>& coords) {
    OpCost r;
    const double qe = local_elems(q, coords);  // queries x channels
    r.flops = 7 * 2 * qe * window;  // per query and key, a D-long product, as in attention
    r.bytes = 8 * qe * es;
    r.saved_bytes = 3 * qe * es;
    return r;
  });
  c += window_halo_cost(with_channels(h, 2 * opts_.channels), q, reach(in), size_of(dtype));
  return c;
}

ShardTensor NeighborhoodAttention::forward(const ShardTensor& x) {
  saved_.reset();  // a forward without backward (evaluation) leaves nothing behind
  check_layer_input(x, 2 + opts_.nd, 2 + opts_.nd, name());
  TESSERA_CHECK(x.dtype() == opts_.dtype, name() << ": input is " << name_of(x.dtype())
                                                 << ", the layer " << name_of(opts_.dtype));
  output_spec(x.spec());
  const ShardTensor h = qkv_->forward(x);
  const Tensor hl = h.local().contiguous();
  const Index C = opts_.channels;
  auto s = std::make_unique<Saved>();
  s->mesh = x.mesh();
  s->h_spec = h.spec();
  s->h_shape = hl.shape();
  s->q_spec = with_channels(h.spec(), C);
  const ShardSpec kv_spec = with_channels(h.spec(), 2 * C);
  if (!plan_ || !plan_->matches(s->mesh, kv_spec)) {
    plan_ = std::make_unique<WindowPlan>(s->mesh, kv_spec, s->q_spec, reach(x.spec()));
  }
  s->q = channels(hl, 0, C);
  s->kv = fill_halo(*plan_, ShardTensor::unchecked(s->mesh, kv_spec, channels(hl, C, 3 * C)));
  kernels::NeighborhoodDesc& d = s->desc;
  d.nd = opts_.nd;
  d.batch = hl.shape(0);
  d.heads = opts_.heads;
  d.dim = C / opts_.heads;
  d.type = opts_.dtype;
  const Box qbox = s->q_spec.local_box(s->mesh.coords());
  for (int i = 0; i < opts_.nd; ++i) {
    d.extent[i] = x.global_shape()[static_cast<std::size_t>(i) + 2];
    d.kernel[i] = kernel_[static_cast<std::size_t>(i)];
    d.dilation[i] = dilation_[static_cast<std::size_t>(i)];
    d.q_lo[i] = qbox.lo[i + 2];
    d.q_shape[i] = qbox.extent(i + 2);
    d.f_lo[i] = s->kv.box.lo[i + 2];
    d.f_shape[i] = s->kv.box.extent(i + 2);
  }
  Index qcells = 1;
  for (int i = 0; i < opts_.nd; ++i) qcells *= d.q_shape[i];
  s->mid = Tensor::empty(s->q.shape(), opts_.dtype, opts_.space);
  s->lse = Tensor::empty({d.batch, d.heads, qcells}, DType::f64, opts_.space);
  const bool work = d.batch * qcells > 0;
  const Tensor kv = s->kv.buffer.contiguous();
  if (work)
    kernels::neighborhood_attention_forward(kv.device(), d, s->q.raw(), kv.raw(), s->mid.raw(),
                                            s->lse.data<double>());
  const ShardTensor y = out_->forward(ShardTensor::unchecked(s->mesh, s->q_spec, s->mid));
  s->out_spec = y.spec();
  saved_ = std::move(s);
  return y;
}

ShardTensor NeighborhoodAttention::backward(const ShardTensor& dy) {
  TESSERA_CHECK(saved_, name() << ": backward before forward");
  Saved& s = *saved_;
  check_output_grad(dy, s.out_spec, opts_.dtype, opts_.space, name());
  const Tensor dmid = out_->backward(dy).local().contiguous();
  Tensor dq = Tensor::empty(s.q.shape(), opts_.dtype, opts_.space);
  HaloFrame dkv = zero_frame(*plan_, opts_.dtype, opts_.space);
  const kernels::NeighborhoodDesc& d = s.desc;
  if (s.q.numel() > 0)
    kernels::neighborhood_attention_backward(
        s.q.device(), d, s.q.raw(), s.kv.buffer.contiguous().raw(), s.mid.raw(), dmid.raw(),
        s.lse.data<double>(), dq.raw(), dkv.buffer.raw());
  add_ghosts_to_owners(*plan_, dkv);
  const Tensor dkv_owned = owned_shard(*plan_, dkv).local();
  const Index C = opts_.channels;
  Tensor dh = Tensor::empty(s.h_shape, opts_.dtype, opts_.space);
  Box qb = Box::from_shape(s.h_shape), kb = qb;
  qb.hi[1] = C;
  kb.lo[1] = C;
  dh.view(qb).copy_from(dq);
  dh.view(kb).copy_from(dkv_owned);
  const ShardTensor dh_full = ShardTensor::unchecked(s.mesh, s.h_spec, dh);
  saved_.reset();  // before the projection's backward allocates
  return qkv_->backward(dh_full);
}

}  // namespace tessera
