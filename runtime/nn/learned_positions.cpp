#include "runtime/nn/learned_positions.hpp"

#include <sstream>

#include "runtime/comm/collective_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "runtime/nn/state_dict.hpp"
#include "runtime/nn/window_layout.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

// Token i of a grid of n_dst between table entries lo and hi (weight w on hi), at the same
// normalized position u = i / (n_dst - 1); exact integers, so the table's own grid maps
// each token onto its entry with w = 0.
struct Tap {
  Index lo = 0, hi = 0;
  double w = 0;
};
Tap tap(Index i, Index n_dst, Index n_src) {
  if (n_src == 1 || n_dst == 1) return {};
  const Index num = i * (n_src - 1), lo = num / (n_dst - 1);
  const double w = static_cast<double>(num - lo * (n_dst - 1)) / static_cast<double>(n_dst - 1);
  return {lo, std::min(lo + 1, n_src - 1), w};
}

// Walks the tokens of `box` (spatial dims from 2) and, for each, the 2^nd table entries it
// interpolates: f(local token index, table token index, weight).
template <class F>
void for_each_tap(const Box& box, const std::vector<Index>& grid, const std::vector<Index>& table,
                  F&& f) {
  const int nd = static_cast<int>(table.size());
  std::vector<std::vector<Tap>> taps(static_cast<std::size_t>(nd));
  Index cells = 1;
  for (int d = 0; d < nd; ++d) {
    for (Index i = box.lo[d + 2]; i < box.hi[d + 2]; ++i)
      taps[static_cast<std::size_t>(d)].push_back(
          tap(i, grid[static_cast<std::size_t>(d)], table[static_cast<std::size_t>(d)]));
    cells *= box.hi[d + 2] - box.lo[d + 2];
  }
  std::vector<Index> idx(static_cast<std::size_t>(nd));
  for (Index c = 0; c < cells; ++c) {
    Index rest = c;
    for (int d = nd - 1; d >= 0; --d) {
      const Index ext = box.hi[d + 2] - box.lo[d + 2];
      idx[static_cast<std::size_t>(d)] = rest % ext;
      rest /= ext;
    }
    for (int corner = 0; corner < (1 << nd); ++corner) {
      double w = 1;
      Index t = 0;
      for (int d = 0; d < nd; ++d) {
        const Tap& p = taps[static_cast<std::size_t>(d)][static_cast<std::size_t>(idx[d])];
        const bool high = (corner >> d) & 1;
        w *= high ? p.w : 1 - p.w;
        t = t * table[static_cast<std::size_t>(d)] + (high ? p.hi : p.lo);
      }
      if (w != 0) f(c, t, w);
    }
  }
}

}  // namespace

LearnedPositions::LearnedPositions(const LearnedPositionsOptions& opts) : opts_(opts) {
  TESSERA_CHECK(opts.nd >= 1 && opts.nd <= 3 && opts.channels >= 1,
                "LearnedPositions: nd " << opts.nd << ", channels " << opts.channels);
  TESSERA_CHECK(static_cast<int>(opts.grid.size()) == opts.nd,
                "LearnedPositions: the table's grid needs " << opts.nd << " extents, not "
                                                            << opts.grid.size());
  for (Index g : opts.grid)
    TESSERA_CHECK(g >= 1, "LearnedPositions: grid extents must be >= 1, not " << g);
  TESSERA_CHECK(opts.dtype == DType::f32 || opts.dtype == DType::f64,
                "LearnedPositions: float32 or float64, not " << name_of(opts.dtype));
  std::vector<Index> shape = {opts.channels};
  shape.insert(shape.end(), opts.grid.begin(), opts.grid.end());
  table_.name = "table";
  // Allocated when laid out: each rank's block of the table only, when it is sharded.
  const std::uint64_t seed = opts.seed;
  defer_value(table_, {shape, opts.dtype, opts.space, [seed](Index i) {
                         return 0.02 * counter_normal(seed, static_cast<std::uint64_t>(i));
                       }});
}

std::string LearnedPositions::name() const {
  std::ostringstream o;
  o << "LearnedPositions(" << opts_.channels << ", grid " << shape_str(opts_.grid) << ")";
  return o.str();
}

ShardSpec LearnedPositions::output_spec(const ShardSpec& in) const {
  check_spatial_spec(in, opts_.nd, name());
  TESSERA_CHECK(
      in.global_shape()[1] == opts_.channels && !in.placement(1).sharded(),
      name() << ": input " << in.str() << ", expected " << opts_.channels << " unsharded channels");
  return in;
}

bool LearnedPositions::on_table_grid(const ShardSpec& in) const {
  return std::vector<Index>(in.global_shape().begin() + 2, in.global_shape().end()) == opts_.grid;
}

OpCost LearnedPositions::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  OpCost c = elementwise_cost(out, size_of(dtype), 2, 4);
  const bool tokens_split = !axes_sharding_dims(in, token_dims(in.ndim())).empty();
  if (on_table_grid(in) && tokens_split && !in.placement(0).sharded())
    c.whole_grad_elems = numel_of(global_shape(table_));
  return c;
}

void LearnedPositions::bind(const Mesh& mesh, const ShardSpec& in) {
  output_spec(in);
  mesh_ = mesh;
  const Box box = in.local_box(mesh.coords());
  Box block = Box::from_shape(global_shape(table_));
  for (int d = 0; d < opts_.nd; ++d) {
    block.lo[d + 1] = box.lo[d + 2];
    block.hi[d + 1] = box.hi[d + 2];
  }
  if (table_.shard) {  // fixed once laid out (GradSync and the optimizer hold the block)
    collective_check(mesh.comm(), on_table_grid(in) && table_.shard->block == block,
                     name() +
                         ": its table is sharded for another decomposition of its grid; "
                         "build the layer anew and load the table (checkpoints hold it "
                         "whole) for this one");
    return;
  }
  if (bound_) return;  // whole on every rank: any grid, any decomposition
  const std::vector<int> axes = axes_sharding_dims(in, token_dims(in.ndim()));
  if (on_table_grid(in) && !axes.empty()) {
    shard_parameter(table_, mesh, block, axes);
  } else {
    materialize(table_);
    table_.awaits_layout = false;
  }
  bound_ = true;  // only once laid out: a layout that failed is tried again
}

Tensor LearnedPositions::embedding(const Box& box, const std::vector<Index>& grid) const {
  std::vector<Index> shape = {opts_.channels};
  for (int d = 0; d < opts_.nd; ++d) shape.push_back(box.hi[d + 2] - box.lo[d + 2]);
  if (table_.shard) return host_converted(table_.value, DType::f64);  // exactly these tokens
  const Tensor t = host_converted(table_.value, DType::f64);
  Tensor e = Tensor::zeros(shape, DType::f64);
  const Index cells = e.numel() / opts_.channels, entries = t.numel() / opts_.channels;
  const double* tp = t.data<double>();
  double* ep = e.data<double>();
  for_each_tap(box, grid, opts_.grid, [&](Index c, Index k, double w) {
    for (Index ch = 0; ch < opts_.channels; ++ch) ep[ch * cells + c] += w * tp[ch * entries + k];
  });
  return e;
}

void LearnedPositions::add_table_grad(const Tensor& g, const Box& box,
                                      const std::vector<Index>& grid) {
  Tensor full;
  if (table_.shard) {
    full = g;
  } else {
    full = Tensor::zeros(table_.grad.shape(), DType::f64);
    const Index cells = g.numel() / opts_.channels, entries = full.numel() / opts_.channels;
    const double* gp = g.data<double>();
    double* fp = full.data<double>();
    for_each_tap(box, grid, opts_.grid, [&](Index c, Index k, double w) {
      for (Index ch = 0; ch < opts_.channels; ++ch) fp[ch * entries + k] += w * gp[ch * cells + c];
    });
  }
  add_into(table_.grad, host_converted(full, opts_.dtype).to(table_.grad.space()));
}

ShardTensor LearnedPositions::forward(const ShardTensor& x) {
  check_layer_input(x, opts_.nd + 2, opts_.nd + 2, name());
  TESSERA_CHECK(x.dtype() == opts_.dtype && x.local().space() == opts_.space,
                name() << ": input is " << name_of(x.dtype()) << "; the table is "
                       << name_of(opts_.dtype) << " in the same memory space as the input");
  if (!bound_ || !(x.spec() == spec_)) bind(x.mesh(), x.spec());
  spec_ = x.spec();
  const Tensor& xl = x.local();
  const Box box = x.local_box();
  const std::vector<Index> grid(x.global_shape().begin() + 2, x.global_shape().end());
  const Tensor e = embedding(box, grid);
  // The same embedding for every sample of the batch.
  const Index n = xl.shape(0), per = e.numel();
  Tensor pe = Tensor::empty(xl.shape(), DType::f64);
  for (Index s = 0; s < n; ++s)
    std::copy(e.data<double>(), e.data<double>() + per, pe.data<double>() + s * per);
  Tensor y = xl.clone();
  add_into(y, host_converted(pe, opts_.dtype).to(xl.space()));
  return ShardTensor::unchecked(x.mesh(), x.spec(), y);
}

ShardTensor LearnedPositions::backward(const ShardTensor& dy) {
  TESSERA_CHECK(bound_, name() << ": backward before forward");
  TESSERA_CHECK(dy.spec() == spec_, name() << ": output gradient laid out as " << dy.spec().str()
                                           << ", forward produced " << spec_.str());
  const Tensor d = host_converted(dy.local(), DType::f64);
  const Index n = d.shape(0), per = n > 0 ? d.numel() / n : 0;
  std::vector<Index> shape(d.shape().begin() + 1, d.shape().end());
  Tensor g = Tensor::zeros(shape, DType::f64);
  for (Index s = 0; s < n; ++s)
    for (Index i = 0; i < per; ++i) g.data<double>()[i] += d.data<double>()[s * per + i];
  const std::vector<Index> grid(dy.global_shape().begin() + 2, dy.global_shape().end());
  add_table_grad(g, dy.local_box(), grid);
  // Partial over the axes that split the batch (sharded table) or the tokens too (whole).
  table_.grad_axes = table_.shard ? axes_sharding_dims(spec_, {0}) : sharding_axes(spec_);
  return dy;
}

}  // namespace tessera
