#include "runtime/attention/physics_attention.hpp"

#include <random>
#include <sstream>

#include "kernels/physics_attention.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

struct PhysicsAttention::Saved {
  Mesh mesh;
  // The input (N, C, ...), the in-projection's (N, 2 H D, ...), the de-sliced (N, H D, ...)
  // and the output.
  ShardSpec in_spec, h_spec, mid_spec, out_spec;
  Tensor h;  // the in-projection's output (N, 2 H D, ...), contiguous
  Tensor w;  // slice weights (N, H, M, P)
  kernels::PhysicsShape shape;
  std::vector<double> acc, t, q, k, v, o, lse;  // summed over the ranks: replicated
  std::vector<double> ws, bs, tau, wq, wk, wv;  // parameter values as float64
};

PhysicsAttention::PhysicsAttention(const PhysicsAttentionOptions& o) : opts_(o) {
  TESSERA_CHECK(o.nd >= 1 && o.nd <= 3, "PhysicsAttention: nd = " << o.nd << ", must be 1..3");
  TESSERA_CHECK(o.channels >= 1 && o.heads >= 1 && o.head_dim >= 1 && o.slices >= 1,
                "PhysicsAttention: channels " << o.channels << ", heads " << o.heads
                                              << ", head_dim " << o.head_dim << ", slices "
                                              << o.slices << ": each must be >= 1");
  TESSERA_CHECK(o.temperature > 0,
                "PhysicsAttention: temperature " << o.temperature << " must be > 0");
  kernel_scalar(o.dtype, "PhysicsAttention");
  const Index H = o.heads, D = o.head_dim, M = o.slices;
  in_ = token_linear(o.nd, o.channels, 2 * H * D, o.dtype, o.space, o.seed, "in");
  out_ = token_linear(o.nd, H * D, o.channels, o.dtype, o.space, o.seed + 1, "out");
  slice_w_ = make_param("slice.weight", {M, D}, 0.0, o.dtype, o.space);
  slice_b_ = make_param("slice.bias", {M}, 0.0, o.dtype, o.space);
  temperature_ = make_param("temperature", {H}, o.temperature, o.dtype, o.space);
  wq_ = make_param("q.weight", {D, D}, 0.0, o.dtype, o.space);
  wk_ = make_param("k.weight", {D, D}, 0.0, o.dtype, o.space);
  wv_ = make_param("v.weight", {D, D}, 0.0, o.dtype, o.space);
  // PyTorch's Linear init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the same on every rank.
  std::mt19937_64 rng(o.seed + 2);
  const double bound = 1.0 / std::sqrt(static_cast<double>(D));
  for (Parameter* p : {&slice_w_, &slice_b_, &wq_, &wk_, &wv_}) fill_uniform(p->value, rng, bound);
}

PhysicsAttention::~PhysicsAttention() = default;

void PhysicsAttention::release_saved() {
  saved_.reset();
  in_->release_saved();
  out_->release_saved();
}

std::string PhysicsAttention::name() const {
  std::ostringstream os;
  os << "PhysicsAttention(C " << opts_.channels << ", heads " << opts_.heads << " x "
     << opts_.head_dim << ", slices " << opts_.slices << ")";
  return os.str();
}

std::vector<Parameter*> PhysicsAttention::parameters() {
  return {&in_->weight(), in_->bias(), &slice_w_, &slice_b_,       &temperature_,
          &wq_,           &wk_,        &wv_,      &out_->weight(), out_->bias()};
}

ShardSpec PhysicsAttention::output_spec(const ShardSpec& in) const {
  check_spatial_spec(in, opts_.nd, name());
  TESSERA_CHECK(in.global_shape()[1] == opts_.channels,
                name() << ": input has " << in.global_shape()[1] << " channels");
  TESSERA_CHECK(!in.placement(1).sharded(), name() << ": the channel dim is sharded (" << in.str()
                                                   << "); a token's channels must be on one rank");
  const ShardSpec h = in_->output_spec(in);
  return out_->output_spec(with_channels(h, opts_.heads * opts_.head_dim));
}

ShardTensor PhysicsAttention::forward(const ShardTensor& x) {
  saved_.reset();  // a forward without backward (evaluation) leaves nothing behind
  check_layer_input(x, 2 + opts_.nd, 2 + opts_.nd, name());
  TESSERA_CHECK(x.dtype() == opts_.dtype, name() << ": input is " << name_of(x.dtype())
                                                 << ", the layer " << name_of(opts_.dtype));
  output_spec(x.spec());
  auto s = std::make_unique<Saved>();
  s->mesh = x.mesh();
  s->in_spec = x.spec();
  const Index H = opts_.heads, D = opts_.head_dim, M = opts_.slices;
  const ShardTensor h = in_->forward(x);
  s->h = h.local().contiguous();
  s->h_spec = h.spec();
  const Index N = s->h.shape(0), P = N > 0 ? s->h.numel() / (N * 2 * H * D) : 0;
  s->shape = {N, H, D, M, P};
  s->ws = param_values(slice_w_);
  s->bs = param_values(slice_b_);
  s->tau = param_values(temperature_);
  s->wq = param_values(wq_);
  s->wk = param_values(wk_);
  s->wv = param_values(wv_);
  for (std::size_t h = 0; h < s->tau.size(); ++h)
    TESSERA_CHECK(s->tau[h] > 0, name() << ": the learned temperature of head " << h << " is "
                                        << s->tau[h]
                                        << ", not positive (the slice softmax divides by it): an "
                                           "update drove it there; a smaller optim.lr or an "
                                           "optim.grad_clip keeps it positive");
  const kernels::SliceParams sp{s->ws.data(), s->bs.data(), s->tau.data()};
  s->w = Tensor::empty({N, H, M, P}, opts_.dtype, opts_.space);
  s->acc.resize(static_cast<std::size_t>(N * H * M * (D + 1)));
  const Device dev = s->h.device();
  kernels::physics_slice(dev, opts_.dtype, s->shape, s->h.raw(), sp, s->w.raw(), s->acc.data());
  allreduce_sum(s->mesh, axes_sharding_dims(s->in_spec, token_dims(s->in_spec.ndim())),
                s->acc.data(), static_cast<Index>(s->acc.size()));
  const std::size_t tok = static_cast<std::size_t>(N * H * M * D);
  for (auto* v : {&s->t, &s->q, &s->k, &s->v, &s->o}) v->assign(tok, 0.0);
  s->lse.assign(static_cast<std::size_t>(N * H * M), 0.0);
  const kernels::SliceTokens st{opts_.eps,   s->t.data(), s->q.data(),  s->k.data(),
                                s->v.data(), s->o.data(), s->lse.data()};
  kernels::physics_tokens_forward(s->shape, s->acc.data(), s->wq.data(), s->wk.data(), s->wv.data(),
                                  st);
  s->mid_spec = with_channels(s->h_spec, H * D);
  std::vector<Index> mid_shape = s->h.shape();
  mid_shape[1] = H * D;
  Tensor mid = Tensor::empty(mid_shape, opts_.dtype, opts_.space);
  kernels::physics_deslice(dev, opts_.dtype, s->shape, s->w.raw(), s->o.data(), mid.raw());
  const ShardTensor y = out_->forward(ShardTensor::unchecked(s->mesh, s->mid_spec, mid));
  s->out_spec = y.spec();
  saved_ = std::move(s);
  return y;
}

ShardTensor PhysicsAttention::backward(const ShardTensor& dy) {
  TESSERA_CHECK(saved_, name() << ": backward before forward");
  Saved& s = *saved_;
  check_output_grad(dy, s.out_spec, opts_.dtype, opts_.space, name());
  const Tensor dmid = out_->backward(dy).local().contiguous();
  const kernels::PhysicsShape& sh = s.shape;
  const Index H = sh.heads, D = sh.dim, M = sh.slices, N = sh.batch;
  const std::size_t tok = static_cast<std::size_t>(N * H * M * D);
  std::vector<double> d_o(tok), da(tok), dz(static_cast<std::size_t>(N * H * M));
  const Device dev = s.h.device();
  kernels::physics_deslice_grad(dev, opts_.dtype, sh, s.w.raw(), dmid.raw(), d_o.data());
  const std::vector<int> all_axes = sharding_axes(s.in_spec);
  allreduce_sum(s.mesh, axes_sharding_dims(s.in_spec, token_dims(s.in_spec.ndim())), d_o.data(),
                static_cast<Index>(tok));
  std::vector<double> dwq(static_cast<std::size_t>(D * D)), dwk(dwq.size()), dwv(dwq.size());
  const kernels::SliceTokens st{opts_.eps,  s.t.data(), s.q.data(),  s.k.data(),
                                s.v.data(), s.o.data(), s.lse.data()};
  kernels::physics_tokens_backward(sh, s.acc.data(), s.wq.data(), s.wk.data(), s.wv.data(), st,
                                   d_o.data(), da.data(), dz.data(), dwq.data(), dwk.data(),
                                   dwv.data());
  // Every rank holds all slice tokens of its samples: q, k, v gradients are partial only
  // over the axes that shard the batch.
  const std::vector<int> batch_axes = axes_sharding_dims(s.in_spec, {0});
  const auto as_tensor = [](const std::vector<double>& v, const std::vector<Index>& shape) {
    Tensor t = Tensor::empty(shape, DType::f64);
    std::copy(v.begin(), v.end(), t.data<double>());
    return t;
  };
  add_param_grad(batch_axes, as_tensor(dwq, {D, D}), 0, wq_);
  add_param_grad(batch_axes, as_tensor(dwk, {D, D}), 0, wk_);
  add_param_grad(batch_axes, as_tensor(dwv, {D, D}), 0, wv_);

  std::vector<double> dws(static_cast<std::size_t>(M * D)), dbs(static_cast<std::size_t>(M)),
      dtau(static_cast<std::size_t>(H));
  Tensor dh = Tensor::empty(s.h.shape(), opts_.dtype, opts_.space);
  const kernels::SliceBackward b{.x = s.h.raw(),
                                 .w = s.w.raw(),
                                 .dy = dmid.raw(),
                                 .o = s.o.data(),
                                 .da = da.data(),
                                 .dz = dz.data(),
                                 .dx = dh.raw(),
                                 .dws = dws.data(),
                                 .dbs = dbs.data(),
                                 .dtau = dtau.data()};
  const kernels::SliceParams sp{s.ws.data(), s.bs.data(), s.tau.data()};
  kernels::physics_slice_backward(dev, opts_.dtype, sh, sp, b);
  add_param_grad(all_axes, as_tensor(dws, {M, D}), 0, slice_w_);
  add_param_grad(all_axes, as_tensor(dbs, {M}), 0, slice_b_);
  add_param_grad(all_axes, as_tensor(dtau, {H}), 0, temperature_);
  const ShardTensor dh_full = ShardTensor::unchecked(s.mesh, s.h_spec, dh);
  saved_.reset();  // before the projection's backward allocates
  return in_->backward(dh_full);
}

OpCost PhysicsAttention::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  const ShardSpec h = in_->output_spec(in), mid = with_channels(h, opts_.heads * opts_.head_dim);
  OpCost c = in_->cost(in, h, dtype);
  c += out_->cost(mid, out, dtype);
  const Index H = opts_.heads, D = opts_.head_dim, M = opts_.slices;
  const int axes = reducing_axes(in, axes_sharding_dims(in, token_dims(in.ndim())));
  const double es = static_cast<double>(size_of(dtype));
  c += busiest(in, [&](const std::vector<int>& coords) {
    OpCost r;
    const Box b = in.local_box(coords);
    const Index N = b.extent(0);
    const double T = b.extent(1) == 0 ? 0.0 : static_cast<double>(b.volume() / (N * b.extent(1)));
    const double hmd = static_cast<double>(N * H * M * D);
    // Slice logits, slice sums and de-slicing are 2 flops per (token, head, slice, dim) each,
    // forward; backward about twice that; the softmax over slices ~10 per (token, head, slice).
    r.flops = 3 * 3 * 2 * T * hmd + 3 * 10 * T * static_cast<double>(N * H * M);
    // The slice weights (N, H, M, T) written, read back and their gradient; h and mid.
    r.bytes =
        (6 * static_cast<double>(N * H * M) * T + 6 * static_cast<double>(N * H * D) * T) * es;
    r.saved_bytes =
        (static_cast<double>(N * H * M) * T + 2 * static_cast<double>(N * H * D) * T) * es;
    // q, k, v of the slice tokens, replicated after the sum: partial over the batch axes only.
    r.whole_grad_elems = in.placement(0).sharded() ? 0 : 3 * D * D;
    r.allreduces = 2 * axes;
    r.allreduce_bytes = static_cast<std::int64_t>(N * H * M * (2 * D + 1) * 8 * axes);
    return r;
  });
  return c;
}

}  // namespace tessera
