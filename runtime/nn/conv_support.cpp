#include "runtime/nn/conv_support.hpp"

#include <cmath>
#include <random>
#include <sstream>

#include "kernels/bias.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera::conv_support {

std::vector<Index> per_dim(const std::vector<Index>& v, int nd, const char* what,
                           const char* layer) {
  TESSERA_CHECK(v.size() == 1 || static_cast<int>(v.size()) == nd,
                layer << ": " << what << " needs 1 or " << nd << " entries, got " << v.size());
  return v.size() == 1 ? std::vector<Index>(nd, v[0]) : v;
}

void check_shape_options(int nd, Index in_channels, Index out_channels, Index groups,
                         const char* layer) {
  TESSERA_CHECK(nd >= 1 && nd <= 3, layer << ": 1 to 3 spatial dims, got " << nd);
  TESSERA_CHECK(in_channels >= 1 && out_channels >= 1 && groups >= 1,
                layer << ": channels and groups must be positive (in " << in_channels << ", out "
                      << out_channels << ", groups " << groups << ")");
  TESSERA_CHECK(in_channels % groups == 0 && out_channels % groups == 0,
                layer << ": groups " << groups << " must divide in_channels " << in_channels
                      << " and out_channels " << out_channels);
}

WindowArgs window_args(const std::vector<Index>& kernel, const std::vector<Index>& stride,
                       const std::vector<Index>& dilation, const std::vector<Index>& padding,
                       const std::vector<Index>& padding_hi, int nd, const char* layer) {
  WindowArgs a;
  a.kernel = per_dim(kernel, nd, "kernel", layer);
  a.stride = per_dim(stride, nd, "stride", layer);
  a.dilation = per_dim(dilation, nd, "dilation", layer);
  a.pad_lo = per_dim(padding, nd, "padding", layer);
  a.pad_hi = padding_hi.empty() ? a.pad_lo : per_dim(padding_hi, nd, "padding_hi", layer);
  return a;
}

std::vector<WindowDim> window_dims(const WindowArgs& a, const char* layer,
                                   const std::function<void(int, const WindowDim&)>& check) {
  std::vector<WindowDim> win;
  for (std::size_t d = 0; d < a.kernel.size(); ++d) {
    WindowDim w{a.kernel[d], a.stride[d], a.dilation[d], a.pad_lo[d], a.pad_hi[d]};
    w.validate(layer);
    check(static_cast<int>(d), w);
    win.push_back(w);
  }
  return win;
}

std::vector<HaloReach> spatial_reach(const std::vector<WindowDim>& win, bool periodic) {
  std::vector<HaloReach> reach = {no_reach(), no_reach()};
  for (const WindowDim& w : win) reach.push_back(window_reach(w, periodic));
  return reach;
}

OpCost direct_conv_cost(const ShardSpec& conv_in, const ShardSpec& conv_out,
                        const std::vector<WindowDim>& win, Index in_per_group, Index weights,
                        bool periodic, DType dtype) {
  const double es = static_cast<double>(size_of(dtype));
  double taps = 1;
  for (const WindowDim& w : win) taps *= static_cast<double>(w.kernel);
  OpCost c = busiest(conv_in, [&](const std::vector<int>& coords) {
    OpCost r;
    const double x = local_elems(conv_in, coords), y = local_elems(conv_out, coords);
    r.flops = 3 * 2.0 * taps * static_cast<double>(in_per_group) * y;
    // Forward reads x, w and writes y; backward reads dy, x, w and writes dx, dw.
    r.bytes = (3 * x + 2 * y + 4 * static_cast<double>(weights)) * es;
    // The host's float32 passes run on channels-last copies of x and y (kernels/cpu/conv_dnnl);
    // cuDNN takes none.
    if (dtype == DType::f32 && taps > 1) r.host_scratch_bytes = (x + y) * es;
    return r;
  });
  c += window_halo_cost(conv_in, conv_out, spatial_reach(win, periodic), size_of(dtype));
  return c;
}

std::string dims_str(const std::vector<Index>& v) {
  std::ostringstream os;
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "x" : "") << v[i];
  return os.str();
}

std::string windows_str(const std::vector<WindowDim>& win) {
  std::vector<Index> k, s, d, plo, phi;
  for (const WindowDim& w : win) {
    k.push_back(w.kernel);
    s.push_back(w.stride);
    d.push_back(w.dilation);
    plo.push_back(w.pad_lo);
    phi.push_back(w.pad_hi);
  }
  return "kernel " + dims_str(k) + ", stride " + dims_str(s) + ", dilation " + dims_str(d) +
         ", padding " + dims_str(plo) + "/" + dims_str(phi);
}

void check_input_spec(const ShardSpec& in, int nd, Index in_channels, const std::string& who) {
  const auto& shape = in.global_shape();
  TESSERA_CHECK(in.ndim() == nd + 2, who << ": input must be (N, C, " << nd
                                         << " spatial dims), got shape " << shape_str(shape));
  TESSERA_CHECK(shape[1] == in_channels, who << ": input has " << shape[1]
                                             << " channels, layer expects " << in_channels
                                             << " (shape " << shape_str(shape) << ")");
  TESSERA_CHECK(!in.placement(1).sharded(),
                who << ": the channel dim must be replicated, spec " << in.str());
  TESSERA_CHECK(!in.has_partial(), who << ": input has pending Partial sums, spec " << in.str());
}

void check_input(const ShardTensor& x, DType dtype, MemSpace space, const std::string& who) {
  TESSERA_CHECK(x.dtype() == dtype && x.local().space() == space,
                who << ": input is " << name_of(x.dtype()) << " in " << name_of(x.local().space())
                    << " memory, layer is " << name_of(dtype) << " in " << name_of(space)
                    << " memory");
}

void check_grad(const ShardTensor& dy, const ShardSpec& out, DType dtype, MemSpace space,
                const std::string& who) {
  check_without_room(dy, who, "output gradient");
  TESSERA_CHECK(dy.spec() == out, who << ": output gradient spec " << dy.spec().str()
                                      << " differs from the output's " << out.str());
  TESSERA_CHECK(dy.dtype() == dtype && dy.local().space() == space,
                who << ": output gradient is " << name_of(dy.dtype()) << " in "
                    << name_of(dy.local().space()) << " memory");
}

kernels::ConvDesc local_desc(int nd, DType t, Index c_in, Index c_out, Index groups,
                             const std::vector<WindowDim>& win, const BlockWindow& bw,
                             const char* layer) {
  kernels::ConvDesc d;
  d.nd = nd;
  d.type = kernel_scalar(t, layer);
  d.c_in = c_in;
  d.c_out = c_out;
  d.groups = groups;
  for (int i = 0; i < nd; ++i) {
    d.kernel[i] = win[i].kernel;
    d.stride[i] = win[i].stride;
    d.dilation[i] = win[i].dilation;
    d.pad_lo[i] = bw.clip_lo[2 + i];
    d.pad_hi[i] = bw.clip_hi[2 + i];
  }
  return d;
}

void set_x_window(kernels::ConvDesc& desc, const Tensor& w) {
  TESSERA_CHECK(w.ndim() == desc.nd + 2,
                "conv window: rank " << w.ndim() << " for a conv" << desc.nd << "d");
  desc.n = w.shape(0);
  for (int d = 0; d < desc.nd; ++d) desc.in[d] = w.shape(2 + d);
  for (int i = 0; i < 5; ++i) desc.x_strides[i] = 0;
  if (!w.is_contiguous())
    for (int i = 0; i < w.ndim(); ++i) desc.x_strides[i] = w.strides()[i];
}

namespace {
Index inner_of(const Tensor& t) {
  Index inner = 1;
  for (int i = 2; i < t.ndim(); ++i) inner *= t.shape(i);
  return inner;
}
}  // namespace

void bias_add(DType t, const Tensor& y, const Tensor& b) {
  if (y.numel() == 0) return;
  kernels::bias_add(y.device(), t, y.shape(0), y.shape(1), inner_of(y), y.raw(), b.raw());
}
void bias_grad(DType t, const Tensor& dy, const Tensor& db) {
  if (dy.numel() == 0) {
    db.zero();
    return;
  }
  kernels::bias_backward(dy.device(), t, dy.shape(0), dy.shape(1), inner_of(dy), dy.raw(),
                         db.raw());
}

Parameter make_param(const std::string& name, const std::vector<Index>& shape, DType t,
                     MemSpace s) {
  return Parameter{name, Tensor::zeros(shape, t, s), Tensor::zeros(shape, t, s)};
}

void make_params(Parameter& weight, Parameter* bias, Index c0, Index c1, Index c_bias,
                 const std::vector<WindowDim>& win, DType t, MemSpace s, unsigned seed) {
  std::vector<Index> shape = {c0, c1};
  Index fan_in = c1;
  for (const WindowDim& w : win) {
    shape.push_back(w.kernel);
    fan_in *= w.kernel;
  }
  weight = make_param("weight", shape, t, s);
  if (bias) *bias = make_param("bias", {c_bias}, t, s);
  init_uniform(weight, bias, fan_in, seed);
}

void init_uniform(Parameter& weight, Parameter* bias, Index fan_in, unsigned seed) {
  std::mt19937_64 rng(seed);
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  fill_uniform(weight.value, rng, bound);
  if (bias) fill_uniform(bias->value, rng, bound);
}

void accumulate_grad(Parameter& p, const Tensor& local, const ShardSpec& spec) {
  add_into(p.grad, local.contiguous());
  p.grad_axes = sharding_axes(spec);
}

}  // namespace tessera::conv_support
