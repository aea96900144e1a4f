#include "runtime/nn/pool_layer.hpp"

#include <algorithm>
#include <sstream>

#include "kernels/pool.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

struct Pool::Saved {
  std::unique_ptr<WindowPlan> plan;  // reused while the input layout stays the same
  HaloFrame x;  // input with ghosts (max pooling's backward recomputes the argmax from it)
  kernels::PoolDesc desc;
  bool have_x = false;
};

namespace {
std::vector<Index> fill_default(std::vector<Index> v, const std::vector<Index>& dflt) {
  return v.empty() ? dflt : v;
}

// PyTorch's ceil-mode output extent over an input of extent L: the padded room divided
// rounding up, less the last window where it would start past the input and the left
// padding; the cells that window reaches past the right padding.
Index ceil_overhang(const WindowDim& w, Index L) {
  const Index room = L + w.pad_lo + w.pad_hi - w.span();
  Index out = floor_div(room + w.stride - 1, w.stride) + 1;
  if (out >= 1 && (out - 1) * w.stride >= L + w.pad_lo) --out;
  if (out < 1) return 0;  // no window: output_spec says so
  return std::max<Index>(0, (out - 1) * w.stride + w.span() - (L + w.pad_lo + w.pad_hi));
}
}  // namespace

Pool::Pool(PoolOptions o) : opts_(std::move(o)) {
  const std::size_t nd = opts_.kernel.size();
  TESSERA_CHECK(nd >= 1 && nd <= 3, "Pool: kernel must give 1 to 3 spatial dims, got " << nd);
  opts_.stride = fill_default(opts_.stride, opts_.kernel);
  opts_.dilation = fill_default(opts_.dilation, std::vector<Index>(nd, 1));
  opts_.pad_lo = fill_default(opts_.pad_lo, std::vector<Index>(nd, 0));
  opts_.pad_hi = fill_default(opts_.pad_hi, opts_.pad_lo);
  TESSERA_CHECK(
      opts_.stride.size() == nd && opts_.dilation.size() == nd && opts_.pad_lo.size() == nd &&
          opts_.pad_hi.size() == nd,
      "Pool: stride, dilation, pad_lo and pad_hi need one entry per spatial dim (" << nd << ")");
  for (std::size_t k = 0; k < nd; ++k) {
    window(static_cast<int>(k)).validate("Pool");
    TESSERA_CHECK(opts_.dilation[k] == 1 || opts_.kind == PoolOptions::Kind::Max,
                  "Pool: spatial dim " << k << ": dilation " << opts_.dilation[k]
                                       << " needs max pooling (average pooling has none, as "
                                          "in PyTorch)");
    TESSERA_CHECK(opts_.pad_lo[k] < opts_.kernel[k] && opts_.pad_hi[k] < opts_.kernel[k],
                  "Pool: spatial dim " << k << ": padding " << opts_.pad_lo[k] << "/"
                                       << opts_.pad_hi[k] << " must be smaller than the kernel "
                                       << opts_.kernel[k]
                                       << " (a window of padding only has no value)");
  }
}

Pool::~Pool() = default;

WindowDim Pool::window(int k) const {
  WindowDim w;
  w.kernel = opts_.kernel.at(k);
  w.stride = opts_.stride.at(k);
  w.dilation = opts_.dilation.at(k);
  w.pad_lo = opts_.pad_lo.at(k);
  w.pad_hi = opts_.pad_hi.at(k);
  return w;
}

WindowDim Pool::window(int k, Index L) const {
  WindowDim w = window(k);
  if (opts_.ceil_mode) w.pad_hi += ceil_overhang(w, L);
  return w;
}

void Pool::release_saved() {
  if (!saved_) return;
  saved_->x = HaloFrame();  // the plan stays for the next forward
  saved_->have_x = false;
}

std::string Pool::name() const {
  std::ostringstream os;
  os << (opts_.kind == PoolOptions::Kind::Max ? "MaxPool" : "AvgPool") << opts_.kernel.size()
     << "d";
  return os.str();
}

ShardSpec Pool::output_spec(const ShardSpec& in) const {
  const int nd = static_cast<int>(opts_.kernel.size());
  check_spatial_spec(in, nd, name());
  std::vector<Index> shape = in.global_shape();
  for (int k = 0; k < nd; ++k) {
    const Index L = in.global_shape()[2 + k];
    const WindowDim w = window(k, L);
    const Index out = w.out_extent(L);
    TESSERA_CHECK(out >= 1, name()
                                << ": spatial dim " << k << " of extent " << L
                                << " is smaller than the kernel " << w.kernel << " plus padding");
    // Every window must hold a real cell (padding has no value to pool), checked here on
    // every rank alike.
    const Index empty =
        kernels::pool_empty_window(L, w.kernel, w.stride, w.dilation, w.pad_lo, out);
    TESSERA_CHECK(empty < 0, name() << ": spatial dim " << k << ": window " << empty
                                    << " holds no input cell (only padding"
                                    << (w.dilation > 1 ? ", or cells the dilation steps over" : "")
                                    << ")");
    shape[2 + k] = out;
  }
  std::vector<std::function<Index(Index)>> first(in.ndim());
  for (int k = 0; k < nd; ++k)
    first[2 + k] = [w = window(k, in.global_shape()[2 + k])](Index c) {
      return conv_first_output_at(w, c);
    };
  return window_output_spec(in, shape, opts_.split, first);
}

namespace {
void pool_forward(const kernels::PoolDesc& d, const Tensor& x, const Tensor& y) {
  kernels::pool_forward(x.device(), d, x.raw(), y.raw());
}
void pool_backward(const kernels::PoolDesc& d, const Tensor& x, const Tensor& dy,
                   const Tensor& dx) {
  kernels::pool_backward(x.device(), d, x.raw(), dy.raw(), dx.raw());
}
}  // namespace

std::vector<HaloReach> Pool::reach(const ShardSpec& in) const {
  std::vector<HaloReach> r(static_cast<std::size_t>(in.ndim()), no_reach());
  for (int k = 0; k + 2 < in.ndim(); ++k)
    r[static_cast<std::size_t>(2 + k)] = window_reach(window(k, in.global_shape()[2 + k]), false);
  return r;
}

OpCost Pool::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  const double es = static_cast<double>(size_of(dtype));
  OpCost c = busiest(in, [&](const std::vector<int>& coords) {
    OpCost r;
    const double x = local_elems(in, coords), y = local_elems(out, coords);
    r.flops = x + y;
    r.bytes = (2 * x + 2 * y) * es;
    return r;
  });
  c += window_halo_cost(in, out, reach(in), size_of(dtype));
  return c;
}

Pool::Saved& Pool::saved_for(const Mesh& mesh, const ShardSpec& in) {
  if (!saved_ || !saved_->plan->matches(mesh, in)) {
    auto s = std::make_unique<Saved>();
    s->plan = std::make_unique<WindowPlan>(mesh, in, output_spec(in), reach(in));
    saved_ = std::move(s);
  }
  return *saved_;
}

HaloWidths Pool::input_room(const Mesh& mesh, const ShardSpec& in) {
  return tessera::input_room(*saved_for(mesh, in).plan);
}

ShardTensor Pool::forward(const ShardTensor& x) {
  const int nd = static_cast<int>(opts_.kernel.size());
  check_layer_input(x, nd + 2, nd + 2, name(), true);
  Saved& s = saved_for(x.mesh(), x.spec());
  const ShardSpec& out_spec = s.plan->driver_spec;  // the plan's, not re-derived per call
  s.x = HaloFrame();  // the last forward's input goes before this one's is filled
  s.x = fill_halo(*s.plan, x);
  s.have_x = true;

  const BlockWindow& bw = s.plan->mine();
  const Box out_box = out_spec.local_box(x.mesh().coords());
  Tensor y = Tensor::empty(out_box.shape(), x.dtype(), x.local().space());
  if (!bw.idle) {
    const Tensor xw = s.x.window(bw.window);
    kernels::PoolDesc& d = s.desc;
    d = kernels::PoolDesc{};
    d.nd = nd;
    d.type = kernel_scalar(x.dtype(), "Pool");
    d.n = xw.shape(0);
    d.c = xw.shape(1);
    for (int k = 0; k < nd; ++k) {
      d.in[k] = xw.shape(2 + k);
      d.kernel[k] = opts_.kernel[k];
      d.stride[k] = opts_.stride[k];
      d.dilation[k] = opts_.dilation[k];
      d.pad_lo[k] = bw.clip_lo[2 + k];  // the domain's padding this rank's windows reach
      d.pad_hi[k] = bw.clip_hi[2 + k];
      // Of that, what lies past the given right padding is ceil-mode overhang.
      d.uncounted_hi[k] = std::max<Index>(0, d.pad_hi[k] - opts_.pad_hi[k]);
    }
    for (int k = 0; k < nd + 2; ++k) d.x_strides[k] = xw.strides()[k];
    d.kind = opts_.kind == PoolOptions::Kind::Max ? kernels::PoolKind::Max : kernels::PoolKind::Avg;
    d.count_include_pad = opts_.count_include_pad;
    for (int k = 0; k < nd; ++k)
      TESSERA_CHECK(d.out(k) == out_box.extent(2 + k),
                    name() << ": internal: local window gives " << d.out(k) << " outputs in dim "
                           << k << ", the output shard has " << out_box.extent(2 + k));
    pool_forward(d, xw, y);
  }
  return ShardTensor::unchecked(x.mesh(), out_spec, y);
}

ShardTensor Pool::backward(const ShardTensor& dy) {
  return backward_impl(dy, false);
}

ShardTensor Pool::backward_impl(const ShardTensor& dy, bool keep_room) {
  TESSERA_CHECK(saved_ && saved_->have_x, name() << ": backward before forward");
  Saved& s = *saved_;
  check_output_grad(dy, s.plan->driver_spec, s.x.buffer.dtype(), s.x.buffer.space(), name());
  const HaloFrame dx = zero_frame(*s.plan, dy.dtype(), dy.local().space());
  const BlockWindow& bw = s.plan->mine();
  if (!bw.idle)
    pool_backward(s.desc, s.x.window(bw.window), dy.local().contiguous(), dx.window(bw.window));
  s.x = HaloFrame();  // served: the saved input goes (the plan stays for the next step)
  s.have_x = false;
  add_ghosts_to_owners(*s.plan, dx);
  return owned_shard(*s.plan, dx, keep_room);
}

}  // namespace tessera
