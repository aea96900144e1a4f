// oneDNN float32 convolution. Activations (x, y, dx, dy) are handed to oneDNN in the
// caller's plain layout (x with its strides), so nothing big is reordered on the hot
// path; only the weights may live in a oneDNN-chosen format (format_tag::any), reordered
// on each call (they are small). A strided x for which oneDNN has only its reference
// implementation is staged through a dense copy instead.
#include "kernels/cpu/conv_dnnl.hpp"

#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "decomp/error.hpp"
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
  return g;
}

// A weights reorder between the plain layout and oneDNN's chosen one.
struct WeightsReorder {
  dnnl::reorder::primitive_desc pd;
  dnnl::reorder prim;
};
WeightsReorder weights_reorder(const memory::desc& from, const memory::desc& to) {
  WeightsReorder r;
  r.pd = dnnl::reorder::primitive_desc(engine(), from, engine(), to, user_scratchpad());
  r.prim = dnnl::reorder(r.pd);
  return r;
}
// Runs a cached reorder; the caller holds stream_mutex().
void run_reorder(const WeightsReorder& r, memory& from, memory& to) {
  r.prim.execute(stream(), {{DNNL_ARG_FROM, from},
                            {DNNL_ARG_TO, to},
                            {DNNL_ARG_SCRATCHPAD, scratchpad_for(r.pd.scratchpad_desc())}});
}

memory::desc any_like(const memory::desc& md) {
  return memory::desc(md.dims(), md.data_type(), memory::format_tag::any);
}

dnnl::convolution_forward::primitive_desc forward_pd(const Geometry& g, const memory::desc& x_md,
                                                     bool bias) {
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                          dnnl::algorithm::convolution_direct, x_md,
                                          any_like(g.w_md), bias ? g.b_md : memory::desc(), g.y_md,
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
  bool bias;
  bool operator==(const Key& o) const { return c == o.c && bias == o.bias; }
};
struct KeyHash {
  std::size_t operator()(const Key& k) const { return k.c.hash() * 2 + (k.bias ? 1 : 0); }
};

// A thread-safe map from Key to an immutable cache entry, built once on first use.
template <class Entry>
class Cache {
 public:
  std::shared_ptr<const Entry> get(const ConvDesc& c, bool bias) {
    const Key k{c, bias};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(k);
    if (it != map_.end()) return it->second;
    auto e = std::make_shared<const Entry>(c, bias);
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
  bool stage_x;
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  bool reorder_w;
  WeightsReorder w_reorder;
  ForwardEntry(const ConvDesc& c, bool bias)
      : g(geometry(c)),
        stage_x(
            needs_staging(c, g, [&](const memory::desc& md) { return forward_pd(g, md, bias); })),
        pd(forward_pd(g, stage_x ? g.x_dense_md : g.x_md, bias)),
        prim(pd),
        reorder_w(pd.weights_desc() != g.w_md) {
    if (reorder_w) w_reorder = weights_reorder(g.w_md, pd.weights_desc());
  }
};

struct BackwardDataEntry {
  Geometry g;
  bool stage_x;
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
  bool reorder_w;
  WeightsReorder w_reorder;
  static dnnl::convolution_backward_data::primitive_desc make(const Geometry& g,
                                                              const memory::desc& dx_md) {
    const dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, dx_md,
                                                  any_like(g.w_md), g.y_md, g.strides, g.dilates,
                                                  g.pad_l, g.pad_r);
    return dnnl::convolution_backward_data::primitive_desc(d, user_scratchpad(), engine(),
                                                           forward_pd(g, dx_md, false));
  }
  BackwardDataEntry(const ConvDesc& c, bool)
      : g(geometry(c)),
        stage_x(needs_staging(c, g, [&](const memory::desc& md) { return make(g, md); })),
        pd(make(g, stage_x ? g.x_dense_md : g.x_md)),
        prim(pd),
        reorder_w(pd.weights_desc() != g.w_md) {
    if (reorder_w) w_reorder = weights_reorder(g.w_md, pd.weights_desc());
  }
};

struct BackwardWeightsEntry {
  Geometry g;
  bool stage_x;
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
  bool reorder_w;
  WeightsReorder w_reorder;  // from oneDNN's diff_weights format to the plain one
  static dnnl::convolution_backward_weights::primitive_desc make(const Geometry& g,
                                                                 const memory::desc& x_md,
                                                                 bool bias) {
    const dnnl::convolution_backward_weights::desc d(
        dnnl::algorithm::convolution_direct, x_md, any_like(g.w_md), bias ? g.b_md : memory::desc(),
        g.y_md, g.strides, g.dilates, g.pad_l, g.pad_r);
    return dnnl::convolution_backward_weights::primitive_desc(d, user_scratchpad(), engine(),
                                                              forward_pd(g, x_md, bias));
  }
  BackwardWeightsEntry(const ConvDesc& c, bool bias)
      : g(geometry(c)),
        stage_x(needs_staging(c, g, [&](const memory::desc& md) { return make(g, md, bias); })),
        pd(make(g, stage_x ? g.x_dense_md : g.x_md, bias)),
        prim(pd),
        reorder_w(pd.diff_weights_desc() != g.w_md) {
    if (reorder_w) w_reorder = weights_reorder(pd.diff_weights_desc(), g.w_md);
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

// Runs a forward or backward-data entry under the stream lock, with w (plain layout)
// reordered first where the primitive wants another.
template <class Entry>
void run_with_weights(const Entry& e, std::unordered_map<int, memory>& args, const float* w) {
  std::lock_guard<std::mutex> lock(stream_mutex());
  if (e.reorder_w) {
    memory wu = wrap(e.g.w_md, w), wi(e.pd.weights_desc(), engine());
    run_reorder(e.w_reorder, wu, wi);
    args.emplace(DNNL_ARG_WEIGHTS, wi);
  } else {
    args.emplace(DNNL_ARG_WEIGHTS, wrap(e.g.w_md, w));
  }
  args.emplace(DNNL_ARG_SCRATCHPAD, scratchpad_for(e.pd.scratchpad_desc()));
  e.prim.execute(stream(), args);
  stream().wait();
}

}  // namespace

void forward(const ConvDesc& c, const float* x, const float* w, const float* bias, float* y) {
  guarded(c, "forward", [&] {
    const auto e = forward_cache().get(c, bias != nullptr);
    std::vector<float> x_tmp;
    const float* xp = x_for_dnnl(c, e->stage_x, x, x_tmp);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(e->pd.src_desc(), xp)},
                                         {DNNL_ARG_DST, wrap(e->g.y_md, y)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, wrap(e->g.b_md, bias));
    run_with_weights(*e, args, w);
  });
}

void backward_data(const ConvDesc& c, const float* dy, const float* w, float* dx) {
  guarded(c, "backward_data", [&] {
    const auto e = backward_data_cache().get(c, false);
    std::vector<float> dx_tmp;
    if (e->stage_x) dx_tmp.resize(static_cast<std::size_t>(c.x_elems()));
    float* dxp = e->stage_x ? dx_tmp.data() : dx;
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, wrap(e->g.y_md, dy)},
                                         {DNNL_ARG_DIFF_SRC, wrap(e->pd.diff_src_desc(), dxp)}};
    run_with_weights(*e, args, w);
    if (e->stage_x) cpu::strided_copy(dx, dx_tmp.data(), x_copy(c, false), sizeof(float));
  });
}

void backward_weights(const ConvDesc& c, const float* x, const float* dy, float* dw, float* dbias) {
  guarded(c, "backward_weights", [&] {
    const auto e = backward_weights_cache().get(c, dbias != nullptr);
    std::vector<float> x_tmp;
    const float* xp = x_for_dnnl(c, e->stage_x, x, x_tmp);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(e->pd.src_desc(), xp)},
                                         {DNNL_ARG_DIFF_DST, wrap(e->g.y_md, dy)}};
    if (dbias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(e->g.b_md, dbias));
    std::lock_guard<std::mutex> lock(stream_mutex());
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
    const auto f = forward_cache().get(c, true);
    const auto d = backward_data_cache().get(c, false);
    const auto w = backward_weights_cache().get(c, true);
    Info i;
    i.forward = f->pd.impl_info_str();
    i.backward_data = d->pd.impl_info_str();
    i.backward_weights = w->pd.impl_info_str();
    i.stages_x = f->stage_x || d->stage_x || w->stage_x;
    i.reorders_weights = f->reorder_w || d->reorder_w || w->reorder_w;
    return i;
  });
}

}  // namespace tessera::kernels::dnnl_conv
