// oneDNN float32 convolution. The caller's activations (x, y, dx, dy) are plain (N, C,
// spatial...) arrays, x with its strides. oneDNN runs plain layouts as im2col + GEMM and its
// direct JIT kernels only on channels-last (or blocked) ones, 2-5x faster on 3x3 kernels
// with the reorders counted, up to 11x for backward weights (README, conv-kernel). So a pass
// with a kernel of more than one tap reorders its activations to channels-last and back on
// each call (channels_last below), where the memory limit leaves room for the copies; 1x1
// kernels (GEMM is the convolution) and backward data into fewer than 4 channels stay
// plain. The weights may live in a oneDNN-chosen format (format_tag::any), reordered on
// each call (they are small). On the plain path a strided x for which oneDNN has only its
// reference implementation is staged through a dense copy.
#include "kernels/cpu/conv_dnnl.hpp"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "decomp/error.hpp"
#include "kernels/device/tracked_block.hpp"
#include "kernels/strided_copy.hpp"

namespace tessera::kernels::dnnl_conv {
namespace {

using dnnl::memory;
using dims = memory::dims;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
// One stream per process. Executions are serialized on it: oneDNN streams are not
// meant for concurrent use, and each execution already uses every OpenMP thread.
dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}
std::mutex& stream_mutex() {
  static std::mutex m;
  return m;
}

// Primitives use a caller-provided scratchpad (oneDNN's own, shared one is not safe
// once primitives run from several threads): one buffer, grown as needed and used
// only under stream_mutex().
dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}
memory scratchpad_for(const memory::desc& md) {
  static std::vector<std::max_align_t> buf;
  const std::size_t n = (md.get_size() + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  if (buf.size() < n) buf.resize(n);
  return memory(md, engine(), buf.data());
}

dims contiguous_strides(const dims& d) {
  dims s(d.size());
  memory::dim acc = 1;
  for (std::size_t i = d.size(); i-- > 0;) s[i] = acc, acc *= d[i];
  return s;
}

// The memory descriptors and conv parameters of a ConvDesc in oneDNN's terms.
struct Geometry {
  dims x, x_strides, w, y, b, strides, dilates, pad_l, pad_r;
  memory::desc x_md, x_dense_md, w_md, y_md, b_md;
  memory::desc x_cl_md, y_cl_md;  // dense channels-last x and y
};

Geometry geometry(const ConvDesc& c) {
  c.validate();
  Geometry g;
  g.x = {c.n, c.c_in};
  g.y = {c.n, c.c_out};
  if (c.groups > 1)
    g.w = {c.groups, c.c_out / c.groups, c.c_in / c.groups};
  else
    g.w = {c.c_out, c.c_in};
  for (int d = 0; d < c.nd; ++d) {
    g.x.push_back(c.in[d]);
    g.y.push_back(c.out(d));
    g.w.push_back(c.kernel[d]);
    g.strides.push_back(c.stride[d]);
    g.dilates.push_back(c.dilation[d] - 1);  // oneDNN counts the gaps
    g.pad_l.push_back(c.pad_lo[d]);
    g.pad_r.push_back(c.pad_hi[d]);
  }
  g.b = {c.c_out};
  Index xs[5];
  c.x_strides_or_dense(xs);
  g.x_strides.assign(xs, xs + c.nd + 2);
  const auto f32 = memory::data_type::f32;
  g.x_md = memory::desc(g.x, f32, g.x_strides);
  g.x_dense_md = memory::desc(g.x, f32, contiguous_strides(g.x));
  g.w_md = memory::desc(g.w, f32, contiguous_strides(g.w));
  g.y_md = memory::desc(g.y, f32, contiguous_strides(g.y));
  g.b_md = memory::desc(g.b, f32, memory::format_tag::x);
  const auto cl = c.nd == 1   ? memory::format_tag::nwc
                  : c.nd == 2 ? memory::format_tag::nhwc
                              : memory::format_tag::ndhwc;
  g.x_cl_md = memory::desc(g.x, f32, cl);
  g.y_cl_md = memory::desc(g.y, f32, cl);
  return g;
}

enum class Pass { Forward, BackwardData, BackwardWeights };

// TESSERA_CONV_LAYOUT: "auto" (default: the rule below), "plain" or "channels_last" (every
// pass), for measurements and for telling a layout's effect apart.
const std::string& layout_setting() {
  static const std::string v = [] {
    const char* e = std::getenv("TESSERA_CONV_LAYOUT");
    const std::string s = e && *e ? e : "auto";
    if (s != "auto" && s != "plain" && s != "channels_last")
      throw Error("TESSERA_CONV_LAYOUT = '" + s + "': auto, plain or channels_last");
    return s;
  }();
  return v;
}

// Whether a pass runs on channels-last copies of its activations (see the top of the file).
bool channels_last(const ConvDesc& c, Pass p) {
  const std::string& set = layout_setting();
  if (set != "auto") return set == "channels_last";
  Index taps = 1;
  for (int d = 0; d < c.nd; ++d) taps *= c.kernel[d];
  if (taps == 1) return false;
  return !(p == Pass::BackwardData && c.c_in / c.groups < 4);
}

// A cached reorder: weights between the plain layout and oneDNN's chosen one, activations
// between the caller's layout and channels-last.
struct CachedReorder {
  dnnl::reorder::primitive_desc pd;
  dnnl::reorder prim;
};
CachedReorder cached_reorder(const memory::desc& from, const memory::desc& to) {
  CachedReorder r;
  r.pd = dnnl::reorder::primitive_desc(engine(), from, engine(), to, user_scratchpad());
  r.prim = dnnl::reorder(r.pd);
  return r;
}
// Runs a cached reorder; the caller holds stream_mutex().
void run_reorder(const CachedReorder& r, memory& from, memory& to) {
  r.prim.execute(stream(), {{DNNL_ARG_FROM, from},
                            {DNNL_ARG_TO, to},
                            {DNNL_ARG_SCRATCHPAD, scratchpad_for(r.pd.scratchpad_desc())}});
}

memory::desc any_like(const memory::desc& md) {
  return memory::desc(md.dims(), md.data_type(), memory::format_tag::any);
}

dnnl::convolution_forward::primitive_desc forward_pd(const Geometry& g, const memory::desc& x_md,
                                                     bool bias, const memory::desc& y_md) {
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                          dnnl::algorithm::convolution_direct, x_md,
                                          any_like(g.w_md), bias ? g.b_md : memory::desc(), y_md,
                                          g.strides, g.dilates, g.pad_l, g.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, user_scratchpad(), engine());
}

// A strided x is used in place when oneDNN runs it with the same implementation as a
// dense one; otherwise (it fell back to the slow reference code) x is staged densely.
template <class MakePd>
bool needs_staging(const ConvDesc& c, const Geometry& g, MakePd make) {
  if (c.x_dense()) return false;
  try {
    return make(g.x_md).impl_info_str() != make(g.x_dense_md).impl_info_str();
  } catch (const dnnl::error&) {
    return true;
  }
}

struct Key {
  ConvDesc c;
  bool bias, cl;
  bool operator==(const Key& o) const { return c == o.c && bias == o.bias && cl == o.cl; }
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    return k.c.hash() * 4 + (k.bias ? 2 : 0) + (k.cl ? 1 : 0);
  }
};

// A thread-safe map from Key to an immutable cache entry, built once on first use.
template <class Entry>
class Cache {
 public:
  std::shared_ptr<const Entry> get(const ConvDesc& c, bool bias, bool cl) {
    const Key k{c, bias, cl};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(k);
    if (it != map_.end()) return it->second;
    auto e = std::make_shared<const Entry>(c, bias, cl);
    map_.emplace(k, e);
    return e;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> map_;
};

template <class F>
auto guarded(const ConvDesc& c, const char* pass, F f) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    throw Error(std::string("oneDNN convolution ") + pass + " failed (" + e.what() + ", status " +
                std::to_string(static_cast<int>(e.status)) + ") for " + c.str());
  }
}

struct ForwardEntry {
  Geometry g;
  bool cl, stage_x;
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  bool reorder_w;
  CachedReorder w_reorder, x_in, y_out;  // x_in, y_out: channels-last only
  ForwardEntry(const ConvDesc& c, bool bias, bool channels_last)
      : g(geometry(c)),
        cl(channels_last),
        stage_x(!cl &&
                needs_staging(
                    c, g, [&](const memory::desc& md) { return forward_pd(g, md, bias, g.y_md); })),
        pd(cl ? forward_pd(g, g.x_cl_md, bias, g.y_cl_md)
              : forward_pd(g, stage_x ? g.x_dense_md : g.x_md, bias, g.y_md)),
        prim(pd),
        reorder_w(pd.weights_desc() != g.w_md) {
    if (reorder_w) w_reorder = cached_reorder(g.w_md, pd.weights_desc());
    if (cl)
      x_in = cached_reorder(g.x_md, pd.src_desc()), y_out = cached_reorder(pd.dst_desc(), g.y_md);
  }
};

struct BackwardDataEntry {
  Geometry g;
  bool cl, stage_x;
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
  bool reorder_w;
  CachedReorder w_reorder, dy_in, dx_out;  // dy_in, dx_out: channels-last only
  static dnnl::convolution_backward_data::primitive_desc make(const Geometry& g,
                                                              const memory::desc& dx_md,
                                                              const memory::desc& dy_md) {
    const dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, dx_md,
                                                  any_like(g.w_md), dy_md, g.strides, g.dilates,
                                                  g.pad_l, g.pad_r);
    return dnnl::convolution_backward_data::primitive_desc(d, user_scratchpad(), engine(),
                                                           forward_pd(g, dx_md, false, dy_md));
  }
  BackwardDataEntry(const ConvDesc& c, bool, bool channels_last)
      : g(geometry(c)),
        cl(channels_last),
        stage_x(!cl &&
                needs_staging(c, g, [&](const memory::desc& md) { return make(g, md, g.y_md); })),
        pd(cl ? make(g, g.x_cl_md, g.y_cl_md) : make(g, stage_x ? g.x_dense_md : g.x_md, g.y_md)),
        prim(pd),
        reorder_w(pd.weights_desc() != g.w_md) {
    if (reorder_w) w_reorder = cached_reorder(g.w_md, pd.weights_desc());
    if (cl)
      dy_in = cached_reorder(g.y_md, pd.diff_dst_desc()),
      dx_out = cached_reorder(pd.diff_src_desc(), g.x_md);
  }
};

struct BackwardWeightsEntry {
  Geometry g;
  bool cl, stage_x;
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
  bool reorder_w;
  CachedReorder w_reorder;    // from oneDNN's diff_weights format to the plain one
  CachedReorder x_in, dy_in;  // channels-last only
  static dnnl::convolution_backward_weights::primitive_desc make(const Geometry& g,
                                                                 const memory::desc& x_md,
                                                                 bool bias,
                                                                 const memory::desc& dy_md) {
    const dnnl::convolution_backward_weights::desc d(
        dnnl::algorithm::convolution_direct, x_md, any_like(g.w_md), bias ? g.b_md : memory::desc(),
        dy_md, g.strides, g.dilates, g.pad_l, g.pad_r);
    return dnnl::convolution_backward_weights::primitive_desc(d, user_scratchpad(), engine(),
                                                              forward_pd(g, x_md, bias, dy_md));
  }
  BackwardWeightsEntry(const ConvDesc& c, bool bias, bool channels_last)
      : g(geometry(c)),
        cl(channels_last),
        stage_x(
            !cl &&
            needs_staging(c, g, [&](const memory::desc& md) { return make(g, md, bias, g.y_md); })),
        pd(cl ? make(g, g.x_cl_md, bias, g.y_cl_md)
              : make(g, stage_x ? g.x_dense_md : g.x_md, bias, g.y_md)),
        prim(pd),
        reorder_w(pd.diff_weights_desc() != g.w_md) {
    if (reorder_w) w_reorder = cached_reorder(pd.diff_weights_desc(), g.w_md);
    if (cl)
      x_in = cached_reorder(g.x_md, pd.src_desc()),
      dy_in = cached_reorder(g.y_md, pd.diff_dst_desc());
  }
};

Cache<ForwardEntry>& forward_cache() {
  static Cache<ForwardEntry> c;
  return c;
}
Cache<BackwardDataEntry>& backward_data_cache() {
  static Cache<BackwardDataEntry> c;
  return c;
}
Cache<BackwardWeightsEntry>& backward_weights_cache() {
  static Cache<BackwardWeightsEntry> c;
  return c;
}

// Copies between the caller's strided x and a dense (N, C, spatial...) buffer.
StridedCopy x_copy(const ConvDesc& c, bool to_dense) {
  StridedCopy s;
  s.ndim = c.nd + 2;
  Index xs[5];
  c.x_strides_or_dense(xs);
  Index acc = 1;
  for (int d = s.ndim - 1; d >= 0; --d) {
    s.shape[d] = d == 0 ? c.n : d == 1 ? c.c_in : c.in[d - 2];
    (to_dense ? s.dst_stride : s.src_stride)[d] = acc;
    (to_dense ? s.src_stride : s.dst_stride)[d] = xs[d];
    acc *= s.shape[d];
  }
  return s;
}

// The pointer oneDNN sees as x: the caller's, or a dense staging copy of it.
const float* x_for_dnnl(const ConvDesc& c, bool stage, const float* x, std::vector<float>& tmp) {
  if (!stage) return x;
  tmp.resize(static_cast<std::size_t>(c.x_elems()));
  cpu::strided_copy(tmp.data(), x, x_copy(c, true), sizeof(float));
  return tmp.data();
}

memory wrap(const memory::desc& md, const void* p) {
  return memory(md, engine(), const_cast<void*>(p));
}

// The channels-last copies of x (or dx) and y (or dy) a pass takes, or none: a pass that
// runs plain, or one whose copies the memory limit refuses (it then runs plain, slower,
// rather than fail).
struct ChannelsLast {
  std::optional<TrackedBlock> x, y;
  ChannelsLast(const ConvDesc& c, Pass p) {
    if (!channels_last(c, p)) return;
    try {
      x.emplace(MemSpace::Host, static_cast<std::size_t>(c.x_elems()) * sizeof(float));
      y.emplace(MemSpace::Host, static_cast<std::size_t>(c.y_elems()) * sizeof(float));
    } catch (const AllocationError&) {
      x.reset();
      y.reset();
    }
  }
  bool on() const { return y.has_value(); }
  float* x_data() const { return static_cast<float*>(x->get()); }
  float* y_data() const { return static_cast<float*>(y->get()); }
};

// Reorders `from` (at p) into `to` (at q); the caller holds stream_mutex().
void reorder_into(const CachedReorder& r, const memory::desc& from, const void* p,
                  const memory::desc& to, void* q) {
  memory a = wrap(from, p), b = wrap(to, q);
  run_reorder(r, a, b);
}

// Runs a forward or backward-data entry under the stream lock, with w (plain layout)
// reordered first where the primitive wants another; `before` and `after` run under the
// lock around it (the channels-last reorders).
template <class Entry, class Before, class After>
void run_with_weights(const Entry& e, std::unordered_map<int, memory>& args, const float* w,
                      Before before, After after) {
  std::lock_guard<std::mutex> lock(stream_mutex());
  if (e.reorder_w) {
    memory wu = wrap(e.g.w_md, w), wi(e.pd.weights_desc(), engine());
    run_reorder(e.w_reorder, wu, wi);
    args.emplace(DNNL_ARG_WEIGHTS, wi);
  } else {
    args.emplace(DNNL_ARG_WEIGHTS, wrap(e.g.w_md, w));
  }
  before();
  args.emplace(DNNL_ARG_SCRATCHPAD, scratchpad_for(e.pd.scratchpad_desc()));
  e.prim.execute(stream(), args);
  after();
  stream().wait();
}

}  // namespace

void forward(const ConvDesc& c, const float* x, const float* w, const float* bias, float* y) {
  guarded(c, "forward", [&] {
    const ChannelsLast cl(c, Pass::Forward);
    const auto e = forward_cache().get(c, bias != nullptr, cl.on());
    std::vector<float> x_tmp;
    const float* xp = cl.on() ? cl.x_data() : x_for_dnnl(c, e->stage_x, x, x_tmp);
    float* yp = cl.on() ? cl.y_data() : y;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(e->pd.src_desc(), xp)},
                                         {DNNL_ARG_DST, wrap(e->pd.dst_desc(), yp)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, wrap(e->g.b_md, bias));
    run_with_weights(
        *e, args, w,
        [&] {
          if (cl.on()) reorder_into(e->x_in, e->g.x_md, x, e->pd.src_desc(), cl.x_data());
        },
        [&] {
          if (cl.on()) reorder_into(e->y_out, e->pd.dst_desc(), yp, e->g.y_md, y);
        });
  });
}

void backward_data(const ConvDesc& c, const float* dy, const float* w, float* dx) {
  guarded(c, "backward_data", [&] {
    const ChannelsLast cl(c, Pass::BackwardData);
    const auto e = backward_data_cache().get(c, false, cl.on());
    std::vector<float> dx_tmp;
    if (e->stage_x) dx_tmp.resize(static_cast<std::size_t>(c.x_elems()));
    float* dxp = cl.on() ? cl.x_data() : e->stage_x ? dx_tmp.data() : dx;
    const float* dyp = cl.on() ? cl.y_data() : dy;
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, wrap(e->pd.diff_dst_desc(), dyp)},
                                         {DNNL_ARG_DIFF_SRC, wrap(e->pd.diff_src_desc(), dxp)}};
    run_with_weights(
        *e, args, w,
        [&] {
          if (cl.on()) reorder_into(e->dy_in, e->g.y_md, dy, e->pd.diff_dst_desc(), cl.y_data());
        },
        [&] {
          if (cl.on()) reorder_into(e->dx_out, e->pd.diff_src_desc(), dxp, e->g.x_md, dx);
        });
    if (e->stage_x) cpu::strided_copy(dx, dx_tmp.data(), x_copy(c, false), sizeof(float));
  });
}

void backward_weights(const ConvDesc& c, const float* x, const float* dy, float* dw, float* dbias) {
  guarded(c, "backward_weights", [&] {
    const ChannelsLast cl(c, Pass::BackwardWeights);
    const auto e = backward_weights_cache().get(c, dbias != nullptr, cl.on());
    std::vector<float> x_tmp;
    const float* xp = cl.on() ? cl.x_data() : x_for_dnnl(c, e->stage_x, x, x_tmp);
    const float* dyp = cl.on() ? cl.y_data() : dy;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(e->pd.src_desc(), xp)},
                                         {DNNL_ARG_DIFF_DST, wrap(e->pd.diff_dst_desc(), dyp)}};
    if (dbias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(e->g.b_md, dbias));
    std::lock_guard<std::mutex> lock(stream_mutex());
    if (cl.on()) {
      reorder_into(e->x_in, e->g.x_md, x, e->pd.src_desc(), cl.x_data());
      reorder_into(e->dy_in, e->g.y_md, dy, e->pd.diff_dst_desc(), cl.y_data());
    }
    memory wi = e->reorder_w ? memory(e->pd.diff_weights_desc(), engine()) : wrap(e->g.w_md, dw);
    args.emplace(DNNL_ARG_DIFF_WEIGHTS, wi);
    args.emplace(DNNL_ARG_SCRATCHPAD, scratchpad_for(e->pd.scratchpad_desc()));
    e->prim.execute(stream(), args);
    if (e->reorder_w) {
      memory wu = wrap(e->g.w_md, dw);
      run_reorder(e->w_reorder, wi, wu);
    }
    stream().wait();
  });
}

Info info(const ConvDesc& c) {
  return guarded(c, "info", [&] {
    const auto f = forward_cache().get(c, true, channels_last(c, Pass::Forward));
    const auto d = backward_data_cache().get(c, false, channels_last(c, Pass::BackwardData));
    const auto w = backward_weights_cache().get(c, true, channels_last(c, Pass::BackwardWeights));
    Info i;
    i.forward = f->pd.impl_info_str();
    i.backward_data = d->pd.impl_info_str();
    i.backward_weights = w->pd.impl_info_str();
    i.stages_x = f->stage_x || d->stage_x || w->stage_x;
    i.reorders_weights = f->reorder_w || d->reorder_w || w->reorder_w;
    i.channels_last = f->cl || d->cl || w->cl;
    i.channels_last_forward = f->cl;
    return i;
  });
}

}  // namespace tessera::kernels::dnnl_conv
