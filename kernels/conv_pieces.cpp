// Convolutions too large for one backend call run in pieces, each an ordinary call.
// cuDNN's descriptors take int extents and strides, so one tensor of a call holds at most
// 2^31 - 1 elements (a float32 sample of 32 channels x 256^3 in a batch of 4 is past it):
//  1. where one sample fits, chunks of the batch: x, y and dx are addressed in place and
//     the weight gradients of the chunks after the first are summed in;
//  2. else, per sample, slabs of the outermost spatial dim. A slab of output rows reads a
//     window of input rows (its halo included; padding where the window crosses the
//     border): that window is copied into a dense buffer, the slab computed and its output
//     copied into y. dx is the sum over slabs of each slab's input gradient (windows of
//     neighbouring slabs overlap by the kernel's reach), dw and dbias the sum over slabs.
// Each slab buffer holds at most kSlabElems elements, so the copies cost a bounded amount
// of memory, not another tensor's worth. The sums change the order of additions only:
// results equal one call to rounding.
#include <algorithm>
#include <atomic>
#include <limits>
#include <string>

#include "decomp/error.hpp"
#include "kernels/conv_pieces.hpp"
#include "kernels/device/tracked_block.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/strided_copy.hpp"

namespace tessera::kernels {
namespace {

std::atomic<Index> g_limit_override{0};
std::atomic<long> g_batch_splits{0}, g_slab_splits{0};

constexpr Index kSlabElems = Index(1) << 28;  // 1 GiB of float32 per slab buffer

// Elements the backend sees in x: the span its strides address, or the dense copy with
// the padding that cuDNN's staging makes of it, whichever is larger.
Index x_need(const ConvDesc& c) {
  Index s[5];
  c.x_strides_or_dense(s);
  const Index ext[5] = {c.n, c.c_in, c.in[0], c.in[1], c.in[2]};
  Index span = 1, padded = c.n * c.c_in;
  for (int d = 0; d < c.nd + 2; ++d) span += (ext[d] - 1) * s[d];
  for (int d = 0; d < c.nd; ++d) padded *= c.in[d] + c.pad_lo[d] + c.pad_hi[d];
  return std::max(span, padded);
}

bool fits(const ConvDesc& c, Index limit) {
  return x_need(c) <= limit && c.y_elems() <= limit;
}

// Element strides of x as the caller laid it out.
struct XStrides {
  Index s[5];
  explicit XStrides(const ConvDesc& c) { c.x_strides_or_dense(s); }
};

Index out_plane(const ConvDesc& c) {  // output elements per row of the first spatial dim
  Index p = 1;
  for (int d = 1; d < c.nd; ++d) p *= c.out(d);
  return p;
}
Index out_sample(const ConvDesc& c) {
  return c.c_out * c.out(0) * out_plane(c);
}

const void* at(const void* base, Index elems, DType t) {
  return static_cast<const char*>(base) + elems * static_cast<Index>(size_of(t));
}
void* at(void* base, Index elems, DType t) {
  return static_cast<char*>(base) + elems * static_cast<Index>(size_of(t));
}

// A tracked scratch block of `elems` elements in the device's memory space.
struct Scratch : TrackedBlock {
  Scratch(const Device& dev, Index elems, DType t)
      : TrackedBlock(dev.space, static_cast<std::size_t>(std::max<Index>(elems, 1)) * size_of(t)) {}
};

void check_pointers(const char* where, std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (!p) throw Error(std::string(where) + ": null tensor pointer");
}

// ---- chunks of the batch ----

// c restricted to `count` samples from any one (same strides; the stride of an extent-1
// batch is immaterial and set to the sample's span so cuDNN's int check sees no giant).
ConvDesc chunk_of(const ConvDesc& c, Index count) {
  ConvDesc p = c;
  p.n = count;
  if (count == 1 && !c.x_dense()) {
    const XStrides xs(c);
    Index span = 1;
    const Index ext[5] = {1, c.c_in, c.in[0], c.in[1], c.in[2]};
    for (int d = 1; d < c.nd + 2; ++d) span += (ext[d] - 1) * xs.s[d];
    p.x_strides[0] = span;
  }
  return p;
}

// Samples per chunk (balanced over the chunks), 0 where one sample is past the limit.
Index chunk_samples(const ConvDesc& c, Index limit) {
  if (!fits(chunk_of(c, 1), limit)) return 0;
  Index lo = 1, hi = c.n;  // the largest count that fits: fits(lo), monotone in count
  while (lo < hi) {
    const Index mid = lo + (hi - lo + 1) / 2;
    if (fits(chunk_of(c, mid), limit))
      lo = mid;
    else
      hi = mid - 1;
  }
  const Index chunks = (c.n + lo - 1) / lo;
  return (c.n + chunks - 1) / chunks;
}

// ---- slabs of the first spatial dim, one sample at a time ----

struct Slab {
  Index o0 = 0, o1 = 0;  // output rows [o0, o1)
  Index a = 0, b = 0;    // input rows [a, b) the window reads (empty where all padding)
  ConvDesc desc;         // the slab's convolution on its dense window, n = 1
  bool all_padding() const { return b <= a; }
};

Slab slab_of(const ConvDesc& c, Index o0, Index o1) {
  Slab s;
  s.o0 = o0, s.o1 = o1;
  ConvDesc p = c;
  p.n = 1;
  for (Index& st : p.x_strides) st = 0;
  // The window in padded coordinates: first and last input row the slab's outputs read.
  const Index first = o0 * c.stride[0] - c.pad_lo[0];
  const Index last = (o1 - 1) * c.stride[0] - c.pad_lo[0] + c.dilation[0] * (c.kernel[0] - 1);
  s.a = std::max<Index>(first, 0);
  s.b = std::min(last + 1, c.in[0]);
  if (s.b <= s.a) {
    // Only padding under the slab: one zero row stands for the input, so the backend
    // still gives the bias (forward) and its gradient (backward weights).
    s.a = s.b = 0;
    p.in[0] = 1, p.pad_lo[0] = 0, p.pad_hi[0] = last - first;
  } else {
    p.in[0] = s.b - s.a, p.pad_lo[0] = s.a - first, p.pad_hi[0] = last + 1 - s.b;
  }
  s.desc = p;
  return s;
}

// Output rows per slab (balanced): the most whose window and output fit `cap` elements.
Index slab_rows_within(const ConvDesc& c, Index cap) {
  Index in_row = c.c_in, out_row = c.c_out * out_plane(c);
  for (int d = 1; d < c.nd; ++d) in_row *= c.in[d] + c.pad_lo[d] + c.pad_hi[d];
  const Index reach = c.dilation[0] * (c.kernel[0] - 1) + 1;
  const Index window_rows = cap / in_row;
  const Index by_x = window_rows < reach ? 0 : (window_rows - reach) / c.stride[0] + 1;
  return std::min({by_x, cap / out_row, c.out(0)});
}

Index slab_rows(const ConvDesc& c, Index limit) {
  Index r = slab_rows_within(c, std::min(limit, kSlabElems));
  if (r < 1) r = slab_rows_within(c, limit);
  if (r < 1)
    throw Error("conv: " + c.str() + " exceeds the backend's " + std::to_string(limit) +
                " elements per tensor even in slabs of one output row of its first spatial "
                "dim; split the domain over more ranks");
  const Index slabs = (c.out(0) + r - 1) / r;
  return (c.out(0) + slabs - 1) / slabs;
}

template <class F>
void for_each_slab(const ConvDesc& c, Index rows, F f) {
  for (Index o0 = 0; o0 < c.out(0); o0 += rows) f(slab_of(c, o0, std::min(o0 + rows, c.out(0))));
}

// Strided views of one sample. x window: rows [a, b) of sample i, all channels.
StridedCopy x_window(const ConvDesc& c, Index rows) {
  const XStrides xs(c);
  StridedCopy v;
  v.ndim = c.nd + 1;
  const Index ext[4] = {c.c_in, rows, c.in[1], c.in[2]};
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = ext[d];
    v.src_stride[d] = v.dst_stride[d] = xs.s[d + 1];
  }
  return v;
}
// The x window gathered into (or scattered from) a dense buffer.
StridedCopy x_to_dense(const ConvDesc& c, Index rows) {
  StridedCopy v = x_window(c, rows);
  Index acc = 1;
  for (int d = v.ndim - 1; d >= 0; --d) v.dst_stride[d] = acc, acc *= v.shape[d];
  return v;
}
// Output rows [o0, o1) of one sample, as (channels, rows x plane) against the dense slab.
StridedCopy y_slab_to_dense(const ConvDesc& c, Index rows) {
  StridedCopy v;
  v.ndim = 2;
  v.shape[0] = c.c_out, v.shape[1] = rows * out_plane(c);
  v.src_stride[0] = c.out(0) * out_plane(c), v.src_stride[1] = 1;
  v.dst_stride[0] = v.shape[1], v.dst_stride[1] = 1;
  return v;
}
// The reverse copy: src and dst swapped.
StridedCopy reversed(StridedCopy v) {
  for (int d = 0; d < v.ndim; ++d) std::swap(v.src_stride[d], v.dst_stride[d]);
  return v;
}

Index window_elems(const ConvDesc& c, Index rows) {
  return x_to_dense(c, rows).count();
}

// Buffers of one slab shape, sized for the largest slab.
struct SlabBuffers {
  Index x_elems, y_elems;
  SlabBuffers(const ConvDesc& c, Index rows) {
    const Index reach = c.dilation[0] * (c.kernel[0] - 1) + 1;
    x_elems = window_elems(c, std::min((rows - 1) * c.stride[0] + reach, c.in[0]));
    y_elems = c.c_out * rows * out_plane(c);
  }
};

// The window of slab s in sample i of x, copied into the dense buffer (zeros where the
// slab reads only padding).
void gather_window(const Device& dev, const ConvDesc& c, const Slab& s, Index sample, const void* x,
                   void* dense) {
  const std::size_t es = size_of(c.type);
  if (s.all_padding()) {
    strided_zero(dev, dense, x_to_dense(c, 1), es);
    return;
  }
  const XStrides xs(c);
  strided_copy(dev, dense, at(x, sample * xs.s[0] + s.a * xs.s[2], c.type),
               x_to_dense(c, s.b - s.a), es);
}

// Output rows [s.o0, s.o1) of dy in sample i, copied into the dense buffer.
void gather_dy(const Device& dev, const ConvDesc& c, const Slab& s, Index sample, const void* dy,
               void* dense) {
  strided_copy(dev, dense, at(dy, sample * out_sample(c) + s.o0 * out_plane(c), c.type),
               y_slab_to_dense(c, s.o1 - s.o0), size_of(c.type));
}

// How a call is cut: `per` samples per chunk of the batch, or (per == 0) slabs of `rows`
// output rows.
struct Cut {
  Index per = 0, rows = 0;
};
Cut cut_of(const Device& dev, const ConvDesc& c) {
  const Index limit = conv_call_limit(dev);
  Cut cut;
  cut.per = chunk_samples(c, limit);
  if (cut.per > 0) {
    ++g_batch_splits;
  } else {
    cut.rows = slab_rows(c, limit);  // throws where one row is too much
    ++g_slab_splits;
  }
  return cut;
}

// Sums the weight gradients of the pieces: the first piece writes dw and dbias, the later
// ones write scratch that is added in.
class WeightGradSum {
 public:
  WeightGradSum(const Device& dev, const ConvDesc& c, void* dw, void* dbias)
      : dev_(dev),
        c_(c),
        dw_(dw),
        db_(dbias),
        sdw_(dev, c.w_elems(), c.type),
        sdb_(dev, c.c_out, c.type) {}
  void* dw() const { return first_ ? dw_ : sdw_.get(); }
  void* dbias() const { return !db_ ? nullptr : first_ ? db_ : sdb_.get(); }
  void piece_done() {
    if (!first_) {
      axpy(dev_, c_.type, c_.w_elems(), 1.0, sdw_.get(), dw_);
      if (db_) axpy(dev_, c_.type, c_.c_out, 1.0, sdb_.get(), db_);
    }
    first_ = false;
  }

 private:
  Device dev_;
  ConvDesc c_;
  void *dw_, *db_;
  Scratch sdw_, sdb_;
  bool first_ = true;
};

}  // namespace

Index conv_call_limit(const Device& dev) {
  const Index over = g_limit_override.load();
  if (over > 0) return over;
  return dev.is_host() ? std::numeric_limits<Index>::max() : std::numeric_limits<int>::max();
}

ScopedConvCallLimit::ScopedConvCallLimit(Index elems)
    : previous_(g_limit_override.exchange(elems)),
      batch_start_(g_batch_splits.load()),
      slab_start_(g_slab_splits.load()) {}
ScopedConvCallLimit::~ScopedConvCallLimit() {
  g_limit_override.store(previous_);
}
long ScopedConvCallLimit::batch_split_calls() const {
  return g_batch_splits.load() - batch_start_;
}
long ScopedConvCallLimit::slab_split_calls() const {
  return g_slab_splits.load() - slab_start_;
}

bool conv_fits_one_call(const Device& dev, const ConvDesc& desc) {
  desc.validate();
  return fits(desc, conv_call_limit(dev));
}

void conv_forward_in_pieces(const Device& dev, const ConvDesc& c, const void* x, const void* w,
                            const void* bias, void* y) {
  check_pointers("conv_forward", {x, w, y});
  const XStrides xs(c);
  const Cut cut = cut_of(dev, c);
  if (const Index per = cut.per; per > 0) {
    for (Index i = 0; i < c.n; i += per)
      backend::conv_forward(dev, chunk_of(c, std::min(per, c.n - i)), at(x, i * xs.s[0], c.type), w,
                            bias, at(y, i * out_sample(c), c.type));
    return;
  }
  const Index rows = cut.rows;
  const SlabBuffers sizes(c, rows);
  Scratch xb(dev, sizes.x_elems, c.type), yb(dev, sizes.y_elems, c.type);
  const std::size_t es = size_of(c.type);
  for (Index i = 0; i < c.n; ++i)
    for_each_slab(c, rows, [&](const Slab& s) {
      gather_window(dev, c, s, i, x, xb.get());
      backend::conv_forward(dev, s.desc, xb.get(), w, bias, yb.get());
      strided_copy(dev, at(y, i * out_sample(c) + s.o0 * out_plane(c), c.type), yb.get(),
                   reversed(y_slab_to_dense(c, s.o1 - s.o0)), es);
    });
}

void conv_backward_data_in_pieces(const Device& dev, const ConvDesc& c, const void* dy,
                                  const void* w, void* dx) {
  check_pointers("conv_backward_data", {dy, w, dx});
  const XStrides xs(c);
  const Cut cut = cut_of(dev, c);
  if (const Index per = cut.per; per > 0) {
    for (Index i = 0; i < c.n; i += per)
      backend::conv_backward_data(dev, chunk_of(c, std::min(per, c.n - i)),
                                  at(dy, i * out_sample(c), c.type), w,
                                  at(dx, i * xs.s[0], c.type));
    return;
  }
  const Index rows = cut.rows;
  const SlabBuffers sizes(c, rows);
  Scratch dyb(dev, sizes.y_elems, c.type), dxb(dev, sizes.x_elems, c.type),
      acc(dev, sizes.x_elems, c.type);
  const std::size_t es = size_of(c.type);
  for (Index i = 0; i < c.n; ++i) {
    void* dx_i = at(dx, i * xs.s[0], c.type);
    strided_zero(dev, dx_i, x_window(c, c.in[0]), es);  // rows no output reads stay 0
    for_each_slab(c, rows, [&](const Slab& s) {
      if (s.all_padding()) return;  // no input row under it
      gather_dy(dev, c, s, i, dy, dyb.get());
      backend::conv_backward_data(dev, s.desc, dyb.get(), w, dxb.get());
      // dx[window] += the slab's gradient (neighbouring windows overlap).
      void* dx_win = at(dx_i, s.a * xs.s[2], c.type);
      const StridedCopy to_dense = x_to_dense(c, s.b - s.a);
      strided_copy(dev, acc.get(), dx_win, to_dense, es);
      axpy(dev, c.type, to_dense.count(), 1.0, dxb.get(), acc.get());
      strided_copy(dev, dx_win, acc.get(), reversed(to_dense), es);
    });
  }
}

void conv_backward_weights_in_pieces(const Device& dev, const ConvDesc& c, const void* x,
                                     const void* dy, void* dw, void* dbias) {
  check_pointers("conv_backward_weights", {x, dy, dw});
  const XStrides xs(c);
  const Cut cut = cut_of(dev, c);
  WeightGradSum sum(dev, c, dw, dbias);
  if (const Index per = cut.per; per > 0) {
    for (Index i = 0; i < c.n; i += per) {
      backend::conv_backward_weights(dev, chunk_of(c, std::min(per, c.n - i)),
                                     at(x, i * xs.s[0], c.type), at(dy, i * out_sample(c), c.type),
                                     sum.dw(), sum.dbias());
      sum.piece_done();
    }
    return;
  }
  const Index rows = cut.rows;
  const SlabBuffers sizes(c, rows);
  Scratch xb(dev, sizes.x_elems, c.type), dyb(dev, sizes.y_elems, c.type);
  for (Index i = 0; i < c.n; ++i)
    for_each_slab(c, rows, [&](const Slab& s) {
      gather_window(dev, c, s, i, x, xb.get());
      gather_dy(dev, c, s, i, dy, dyb.get());
      backend::conv_backward_weights(dev, s.desc, xb.get(), dyb.get(), sum.dw(), sum.dbias());
      sum.piece_done();
    });
}

}  // namespace tessera::kernels
