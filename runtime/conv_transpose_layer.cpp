#include "runtime/conv_transpose_layer.hpp"

#include <algorithm>
#include <sstream>

#include "runtime/conv_support.hpp"
#include "runtime/error.hpp"

namespace tessera {

namespace cs = conv_support;

namespace {
std::string dims_str(const std::vector<Index>& v) {
  std::ostringstream os;
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "x" : "") << v[i];
  return os.str();
}
}  // namespace

ConvTransposeNd::ConvTransposeNd(const ConvTransposeOptions& o) : opts_(o) {
  const int nd = o.nd;
  const char* L = "ConvTransposeNd";
  TESSERA_CHECK(nd >= 1 && nd <= 3, L << ": 1 to 3 spatial dims, got " << nd);
  TESSERA_CHECK(o.in_channels >= 1 && o.out_channels >= 1 && o.groups >= 1,
                L << ": channels and groups must be positive (in " << o.in_channels << ", out "
                  << o.out_channels << ", groups " << o.groups << ")");
  TESSERA_CHECK(o.in_channels % o.groups == 0 && o.out_channels % o.groups == 0,
                L << ": groups " << o.groups << " must divide in_channels " << o.in_channels
                  << " and out_channels " << o.out_channels);
  cs::scalar_of(o.dtype, L);
  const auto k = cs::per_dim(o.kernel, nd, "kernel", L);
  const auto s = cs::per_dim(o.stride, nd, "stride", L);
  const auto dil = cs::per_dim(o.dilation, nd, "dilation", L);
  const auto plo = cs::per_dim(o.padding, nd, "padding", L);
  const auto phi = o.padding_hi.empty() ? plo : cs::per_dim(o.padding_hi, nd, "padding_hi", L);
  out_pad_ = cs::per_dim(o.output_padding, nd, "output_padding", L);
  for (int d = 0; d < nd; ++d) {
    WindowDim w{k[d], s[d], dil[d], plo[d], phi[d]};
    w.validate(L);
    TESSERA_CHECK(out_pad_[d] >= 0 && out_pad_[d] < std::max(s[d], dil[d]),
                  L << ": output_padding " << out_pad_[d] << " of dim " << d
                    << " must be smaller than the stride or the dilation");
    // No input's window lies wholly in the cropped margins, so no rank's window is empty.
    TESSERA_CHECK(w.pad_lo < w.span() && w.pad_hi - out_pad_[d] < w.span(),
                  L << ": padding " << w.pad_lo << "," << w.pad_hi << " of dim " << d
                    << " must be narrower than the window span " << w.span());
    win_.push_back(w);
  }
  std::vector<Index> wshape = {o.in_channels, o.out_channels / o.groups};
  Index fan_in = o.out_channels / o.groups;  // PyTorch's fan_in of this weight layout
  for (int d = 0; d < nd; ++d) {
    wshape.push_back(k[d]);
    fan_in *= k[d];
  }
  weight_ = cs::make_param("weight", wshape, o.dtype, o.space);
  if (o.bias) bias_ = cs::make_param("bias", {o.out_channels}, o.dtype, o.space);
  cs::init_uniform(weight_, o.bias ? &bias_ : nullptr, fan_in, o.seed);
}

ConvTransposeNd::~ConvTransposeNd() = default;

std::string ConvTransposeNd::name() const {
  std::vector<Index> k, s, d, plo, phi;
  for (const WindowDim& w : win_) {
    k.push_back(w.kernel);
    s.push_back(w.stride);
    d.push_back(w.dilation);
    plo.push_back(w.pad_lo);
    phi.push_back(w.pad_hi);
  }
  std::ostringstream os;
  os << "ConvTranspose" << opts_.nd << "d(" << opts_.in_channels << "->" << opts_.out_channels
     << ", kernel " << dims_str(k) << ", stride " << dims_str(s) << ", dilation " << dims_str(d)
     << ", padding " << dims_str(plo) << "/" << dims_str(phi) << ", output_padding "
     << dims_str(out_pad_) << ", groups " << opts_.groups << (opts_.bias ? ", bias" : "") << ")";
  return os.str();
}

ShardSpec ConvTransposeNd::output_spec(const ShardSpec& in) const {
  const int nd = opts_.nd;
  const auto& shape = in.global_shape();
  TESSERA_CHECK(in.ndim() == nd + 2, name() << ": input must be (N, C, " << nd
                                            << " spatial dims), got shape " << shape_str(shape));
  TESSERA_CHECK(shape[1] == opts_.in_channels,
                name() << ": input has " << shape[1] << " channels, layer expects "
                       << opts_.in_channels << " (shape " << shape_str(shape) << ")");
  TESSERA_CHECK(!in.placement(1).sharded(),
                name() << ": the channel dim must be replicated, spec " << in.str());
  TESSERA_CHECK(!in.has_partial(), name() << ": input has pending Partial sums, spec " << in.str());
  std::vector<Index> out = {shape[0], opts_.out_channels};
  std::vector<std::function<Index(Index)>> first_at(2);
  for (int d = 0; d < nd; ++d) {
    const WindowDim& w = win_[d];
    TESSERA_CHECK(shape[2 + d] >= 1, name() << ": spatial dim " << d << " is empty");
    const Index e = (shape[2 + d] - 1) * w.stride - w.pad_lo - w.pad_hi + w.span() + out_pad_[d];
    TESSERA_CHECK(e >= 1, name() << ": output extent " << e << " of spatial dim " << d);
    out.push_back(e);
    first_at.push_back([w](Index c) { return transposed_first_output_at(w, c); });
  }
  return window_output_spec(in, out, opts_.split, first_at);
}

const WindowPlan& ConvTransposeNd::plan_for(const Mesh& mesh, const ShardSpec& in) {
  if (plan_ && mesh.comm() == plan_->mesh.comm() && in == plan_->driver_spec) return *plan_;
  const ShardSpec out = output_spec(in);
  std::vector<HaloReach> reach = {no_reach(), no_reach()};
  for (const WindowDim& w : win_) reach.push_back(window_reach(w, false));
  plan_.reset();
  plan_ = std::make_unique<WindowPlan>(mesh, out, in, reach);
  return *plan_;
}

namespace {
// The conv this layer transposes, on this rank's output window (its "x").
kernels::ConvDesc local_desc(const ConvTransposeOptions& o, const std::vector<WindowDim>& win,
                             const BlockWindow& bw) {
  kernels::ConvDesc d;
  d.nd = o.nd;
  d.type = cs::scalar_of(o.dtype, "ConvTransposeNd");
  d.c_in = o.out_channels;
  d.c_out = o.in_channels;
  d.groups = o.groups;
  for (int i = 0; i < o.nd; ++i) {
    d.kernel[i] = win[i].kernel;
    d.stride[i] = win[i].stride;
    d.dilation[i] = win[i].dilation;
    d.pad_lo[i] = bw.clip_lo[2 + i];
    d.pad_hi[i] = bw.clip_hi[2 + i];
  }
  return d;
}

void check_local(const kernels::ConvDesc& d, const Box& in_box, const std::string& who) {
  for (int i = 0; i < d.nd; ++i)
    TESSERA_CHECK(d.out(i) == in_box.extent(2 + i), who << ": internal: local input " << d.out(i)
                                                        << " != block " << in_box.extent(2 + i)
                                                        << " in dim " << i);
}
}  // namespace

ShardTensor ConvTransposeNd::forward(const ShardTensor& x) {
  const WindowPlan& p = plan_for(x.mesh(), x.spec());
  TESSERA_CHECK(x.dtype() == opts_.dtype && x.local().space() == opts_.space,
                name() << ": input is " << name_of(x.dtype()) << " in "
                       << name_of(x.local().space()) << " memory, layer is " << name_of(opts_.dtype)
                       << " in " << name_of(opts_.space) << " memory");
  saved_x_ = x;
  have_saved_ = true;
  const BlockWindow& bw = p.mine();
  HaloFrame g = zero_frame(p, opts_.dtype, opts_.space, bw.idle ? nullptr : &bw.window);
  if (!bw.idle) {
    kernels::ConvDesc d = local_desc(opts_, win_, bw);
    const Tensor gw = g.window(bw.window);
    cs::set_x_window(d, gw);
    check_local(d, x.local_box(), name());
    cs::backward_data(opts_.space, d, x.local().raw(), weight_.value.raw(), gw.raw());
  }
  add_ghosts_to_owners(p, g);
  ShardTensor y = owned_shard(p, g);
  if (opts_.bias)
    cs::bias_add(opts_.space, cs::scalar_of(opts_.dtype, "ConvTransposeNd"), y.local(),
                 bias_.value);
  return y;
}

ShardTensor ConvTransposeNd::backward(const ShardTensor& dy) {
  TESSERA_CHECK(have_saved_ && plan_, name() << ": backward without a forward");
  const WindowPlan& p = *plan_;
  TESSERA_CHECK(dy.spec() == p.haloed_spec, name() << ": output gradient spec " << dy.spec().str()
                                                   << " differs from the output's "
                                                   << p.haloed_spec.str());
  TESSERA_CHECK(dy.dtype() == opts_.dtype && dy.local().space() == opts_.space,
                name() << ": output gradient is " << name_of(dy.dtype()) << " in "
                       << name_of(dy.local().space()) << " memory");
  const kernels::Scalar type = cs::scalar_of(opts_.dtype, "ConvTransposeNd");
  const HaloFrame f = fill_halo(p, dy);
  const Box in_box = saved_x_.local_box();
  Tensor dx = Tensor::empty(in_box.shape(), opts_.dtype, opts_.space);
  Tensor dw = Tensor::zeros(weight_.value.shape(), opts_.dtype, opts_.space);
  const BlockWindow& bw = p.mine();
  if (!bw.idle) {
    kernels::ConvDesc d = local_desc(opts_, win_, bw);
    const Tensor fw = f.window(bw.window);
    cs::set_x_window(d, fw);
    check_local(d, in_box, name());
    cs::forward(opts_.space, d, fw.raw(), weight_.value.raw(), nullptr, dx.raw());
    cs::backward_weights(opts_.space, d, fw.raw(), saved_x_.local().raw(), dw.raw(), nullptr);
  }
  cs::accumulate_grad(weight_, dw, p.mesh, p.driver_spec, reduce_grads);
  if (opts_.bias) {
    Tensor db = Tensor::zeros({opts_.out_channels}, opts_.dtype, opts_.space);
    cs::bias_grad(opts_.space, type, dy.local(), db);
    cs::accumulate_grad(bias_, db, p.mesh, p.driver_spec, reduce_grads);
  }
  saved_x_ = ShardTensor();
  have_saved_ = false;
  return ShardTensor::unchecked(p.mesh, p.driver_spec, dx);
}

std::vector<Parameter*> ConvTransposeNd::parameters() {
  if (opts_.bias) return {&weight_, &bias_};
  return {&weight_};
}

}  // namespace tessera
