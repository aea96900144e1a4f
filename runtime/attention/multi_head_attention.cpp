#include "runtime/attention/multi_head_attention.hpp"

#include <algorithm>
#include <sstream>

#include "kernels/attention.hpp"
#include "kernels/strided_copy.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"

namespace tessera {

struct MultiHeadAttention::Ring {
  Mesh outer;  // the layer input's mesh
  ShardSpec in_spec;
  AxesComm group;            // ranks sharing a sample's tokens
  Mesh line;                 // a 1-D mesh over them
  std::vector<Index> sizes;  // tokens per rank of the line
};

struct MultiHeadAttention::Saved {
  Mesh mesh;
  ShardSpec h_spec, mid_spec, out_spec;
  std::vector<Index> h_shape;
};

namespace {

// Between channel-first (N, parts C, T) and heads (N H, T, D): part `part` of the channels,
// head h at channels [h D, h D + D). to_heads: channel-first -> heads, else back.
void move_heads(const Tensor& cf, Index part, const Tensor& heads, Index H, bool to_heads) {
  const Index N = cf.shape(0), Cp = cf.shape(1), T = cf.shape(2), D = heads.shape(2);
  kernels::StridedCopy c;
  c.ndim = 4;  // (n, h, d, t)
  const Index shape[4] = {N, H, D, T};
  const Index cf_stride[4] = {Cp * T, D * T, T, 1};
  const Index hd_stride[4] = {H * T * D, T * D, 1, D};
  for (int i = 0; i < 4; ++i) {
    c.shape[i] = shape[i];
    c.src_stride[i] = to_heads ? cf_stride[i] : hd_stride[i];
    c.dst_stride[i] = to_heads ? hd_stride[i] : cf_stride[i];
  }
  const std::size_t es = cf.elem_size();
  auto* cfp =
      static_cast<unsigned char*>(cf.raw()) + static_cast<std::size_t>(part * H * D * T) * es;
  if (to_heads)
    kernels::strided_copy(cf.device(), heads.raw(), cfp, kernels::simplify(c), es);
  else
    kernels::strided_copy(cf.device(), cfp, heads.raw(), kernels::simplify(c), es);
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& o) : opts_(o) {
  TESSERA_CHECK(o.nd >= 1 && o.nd <= 3, "MultiHeadAttention: nd = " << o.nd);
  TESSERA_CHECK(o.channels >= 1 && o.heads >= 1 && o.channels % o.heads == 0,
                "MultiHeadAttention: " << o.channels << " channels in " << o.heads
                                       << " heads: heads must divide the channels");
  kernel_scalar(o.dtype, "MultiHeadAttention");
  qkv_ = token_linear(o.nd, o.channels, 3 * o.channels, o.dtype, o.space, o.seed, "qkv");
  out_ = token_linear(o.nd, o.channels, o.channels, o.dtype, o.space, o.seed + 1, "out");
}

MultiHeadAttention::~MultiHeadAttention() = default;

std::vector<Parameter*> MultiHeadAttention::parameters() {
  return {&qkv_->weight(), qkv_->bias(), &out_->weight(), out_->bias()};
}

void MultiHeadAttention::release_saved() {
  saved_.reset();
  qkv_->release_saved();
  out_->release_saved();
  if (attn_) attn_->release_saved();  // made at the first forward
}

std::string MultiHeadAttention::name() const {
  std::ostringstream os;
  os << "MultiHeadAttention(C " << opts_.channels << ", heads " << opts_.heads << ")";
  return os.str();
}

std::string MultiHeadAttention::describe() const {
  if (!attn_ || !ring_) return name() + ": not run yet";
  std::ostringstream os;
  os << name() << ": " << name_of(attn_->chosen()) << " over " << ring_->group.size() << " rank(s)";
  return os.str();
}

ShardSpec MultiHeadAttention::output_spec(const ShardSpec& in) const {
  check_spatial_spec(in, opts_.nd, name());
  TESSERA_CHECK(in.global_shape()[1] == opts_.channels,
                name() << ": input has " << in.global_shape()[1] << " channels");
  TESSERA_CHECK(!in.placement(1).sharded(),
                name() << ": the channel dim is sharded (" << in.str() << ")");
  return out_->output_spec(with_channels(qkv_->output_spec(in), opts_.channels));
}

ShardTensor MultiHeadAttention::forward(const ShardTensor& x) {
  saved_.reset();  // a forward without backward (evaluation) leaves nothing behind
  check_layer_input(x, 2 + opts_.nd, 2 + opts_.nd, name());
  TESSERA_CHECK(x.dtype() == opts_.dtype, name() << ": input is " << name_of(x.dtype())
                                                 << ", the layer " << name_of(opts_.dtype));
  output_spec(x.spec());
  const Mesh& mesh = x.mesh();
  const ShardTensor h = qkv_->forward(x);
  const Tensor hl = h.local().contiguous();
  const Index N = hl.shape(0), C = opts_.channels, H = opts_.heads, D = C / H;
  const Index T = N > 0 ? hl.numel() / (N * 3 * C) : 0;
  // The token group and its line mesh, for this input layout (collective to build).
  if (!ring_ || ring_->outer.comm() != mesh.comm() || ring_->in_spec != x.spec()) {
    auto r = std::make_unique<Ring>();
    r->outer = mesh;
    r->in_spec = x.spec();
    r->group = AxesComm(mesh, axes_sharding_dims(x.spec(), token_dims(x.spec().ndim())));
    r->line = Mesh(r->group.comm(), {r->group.size()}, {"tokens"});
    r->sizes.assign(static_cast<std::size_t>(r->group.size()), 0);
    TESSERA_MPI(
        MPI_Allgather(&T, 1, MPI_INT64_T, r->sizes.data(), 1, MPI_INT64_T, r->group.comm()));
    ring_ = std::move(r);
    RingAttentionOptions ro;
    ro.axis = 0;
    attn_ = std::make_unique<SequenceAttention>(ro, opts_.algorithm);
  }
  const Tensor cf = hl.reshape({N, 3 * C, T});
  Index S = 0;
  for (Index s : ring_->sizes) S += s;
  const ShardSpec seq({N * H, S, D}, {Replicate(), Shard(0), Replicate()}, ring_->line, {},
                      {{}, ring_->sizes, {}});
  std::array<ShardTensor, 3> qkv;
  for (Index part = 0; part < 3; ++part) {
    Tensor t = Tensor::empty({N * H, T, D}, hl.dtype(), hl.space());
    move_heads(cf, part, t, H, true);
    qkv[static_cast<std::size_t>(part)] = ShardTensor::unchecked(ring_->line, seq, t);
  }
  const ShardTensor o = attn_->forward(qkv[0], qkv[1], qkv[2]);
  Tensor mid = Tensor::empty({N, C, T}, hl.dtype(), hl.space());
  move_heads(mid, 0, o.local().contiguous(), H, false);
  auto s = std::make_unique<Saved>();
  s->mesh = mesh;
  s->h_spec = h.spec();
  s->h_shape = hl.shape();
  s->mid_spec = with_channels(h.spec(), C);
  std::vector<Index> mid_shape = hl.shape();
  mid_shape[1] = C;
  const ShardTensor y =
      out_->forward(ShardTensor::unchecked(mesh, s->mid_spec, mid.reshape(mid_shape)));
  s->out_spec = y.spec();
  saved_ = std::move(s);
  return y;
}

ShardTensor MultiHeadAttention::backward(const ShardTensor& dy) {
  TESSERA_CHECK(saved_, name() << ": backward before forward");
  Saved& s = *saved_;
  check_output_grad(dy, s.out_spec, opts_.dtype, dy.local().space(), name());
  const Tensor dmid = out_->backward(dy).local().contiguous();
  const Index N = dmid.shape(0), C = opts_.channels, H = opts_.heads, D = C / H;
  const Index T = N > 0 ? dmid.numel() / (N * C) : 0;
  Index S = 0;
  for (Index v : ring_->sizes) S += v;
  const ShardSpec seq({N * H, S, D}, {Replicate(), Shard(0), Replicate()}, ring_->line, {},
                      {{}, ring_->sizes, {}});
  Tensor go = Tensor::empty({N * H, T, D}, dmid.dtype(), dmid.space());
  move_heads(dmid.reshape({N, C, T}), 0, go, H, true);
  const auto grads = attn_->backward(ShardTensor::unchecked(ring_->line, seq, go));
  attn_->release_saved();  // served (a bias gradient is not kept: the layer takes none)
  Tensor dh = Tensor::empty({N, 3 * C, T}, dmid.dtype(), dmid.space());
  for (Index part = 0; part < 3; ++part)
    move_heads(dh, part, grads[static_cast<std::size_t>(part)].local().contiguous(), H, false);
  const ShardTensor dh_full = ShardTensor::unchecked(s.mesh, s.h_spec, dh.reshape(s.h_shape));
  saved_.reset();  // before the projection's backward allocates
  return qkv_->backward(dh_full);
}

OpCost MultiHeadAttention::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  const ShardSpec h = qkv_->output_spec(in), mid = with_channels(h, opts_.channels);
  OpCost c = qkv_->cost(in, h, dtype);
  c += out_->cost(mid, out, dtype);
  const std::vector<int> tokens = token_dims(in.ndim());
  const std::vector<int> axes = axes_sharding_dims(in, tokens);
  const int G = ranks_over(in, axes);
  const Index H = opts_.heads, D = opts_.channels / H;
  const double es = static_cast<double>(size_of(dtype));
  c += busiest(in, [&](const std::vector<int>& coords) {
    // The token group of this rank: its coords along the group's axes (row-major), the
    // others fixed; every member's token count is its block's.
    std::vector<Index> sizes;
    int me = 0;
    std::vector<int> member = coords;
    for (int g = 0; g < G; ++g) {
      int rest = g;
      for (auto a = axes.rbegin(); a != axes.rend(); ++a) {
        const int n = in.mesh_dims()[static_cast<std::size_t>(*a)];
        member[static_cast<std::size_t>(*a)] = rest % n;
        rest /= n;
      }
      if (member == coords) me = g;
      const Box b = in.local_box(member);
      Index t = 1;
      for (int d : tokens) t *= b.extent(d);
      sizes.push_back(t);
    }
    const Box mine = in.local_box(coords);
    const Index N = mine.extent(0), NH = N * H;
    Index S = 0;
    for (Index t : sizes) S += t;
    const ShardSpec seq({NH, S, D}, {Replicate(), Shard(0), Replicate()}, {G}, {}, {{}, sizes, {}});
    const SequenceAlgorithm algo =
        resolve_sequence_algorithm(opts_.algorithm, seq.global_shape(), false, G, dtype);
    const std::vector<int> at = {me};
    OpCost r;
    const double T = static_cast<double>(sizes[static_cast<std::size_t>(me)]);
    double queries_keys = static_cast<double>(NH) * T * static_cast<double>(S);  // pairs
    if (algo == SequenceAlgorithm::AllToAll && G > 1) {
      const ShardSpec heads({NH, S, D}, {Shard(0), Replicate(), Replicate()}, {G});
      queries_keys = local_elems(heads, at) / static_cast<double>(D) * static_cast<double>(S);
      r.alltoalls = 8;  // q, k, v and out forward; dout, dq, dk, dv backward
      r.alltoall_bytes = static_cast<std::int64_t>(
          4 * es *
          static_cast<double>(elements_sent(seq, heads, at) + elements_sent(heads, seq, at)));
    } else if (algo == SequenceAlgorithm::AllGather && G > 1) {
      const double block = static_cast<double>(NH) * T * static_cast<double>(D) * es;
      r.allgathers = 2;  // k and v gathered whole
      r.allgather_bytes = static_cast<std::int64_t>(2 * block);
      r.reduce_scatters = 2;  // their gradients, summed back to the key blocks
      r.reduce_scatter_bytes = static_cast<std::int64_t>(2 * static_cast<double>(NH * S * D) * es);
    } else if (algo == SequenceAlgorithm::Ring && G > 1) {
      // Forward: k and v of every block but the next one's pass through; backward: k, v and
      // their gradients of every block, home again.
      double fwd = 0;
      for (int step = 0; step + 1 < G; ++step)
        fwd += static_cast<double>(sizes[static_cast<std::size_t>((me - step + G) % G)]);
      const double row = static_cast<double>(NH * D) * es;
      r.ring_bytes = static_cast<std::int64_t>((2 * fwd + 4 * static_cast<double>(S)) * row);
      r.ring_messages = 2 * G - 1;
    }
    const double d = static_cast<double>(D);
    r.flops = 7 * 2 * queries_keys * d + 12 * queries_keys;  // products; softmax and its grad
    // q, k, v, out in and out of the head layout, both directions.
    r.bytes = 16 * static_cast<double>(NH) * T * d * es;
    // q, k, v and out in the sequence and the algorithm's layouts, the out Linear's input.
    r.saved_bytes = 8 * static_cast<double>(NH) * T * d * es;
    // The local kernel's scratch, for its longest key sequence (a ring block, else all keys).
    Index keys = S;
    if (algo == SequenceAlgorithm::Ring && G > 1)
      keys = *std::max_element(sizes.begin(), sizes.end());
    r.scratch_bytes = static_cast<double>(kernels::attention_host_scratch_bytes(dtype, keys));
    return r;
  });
  return c;
}

}  // namespace tessera
