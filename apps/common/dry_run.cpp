#include "apps/common/dry_run.hpp"

#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "decomp/error.hpp"
#include "decomp/halo_geometry.hpp"
#include "decomp/window_halo.hpp"
#include "kernels/upsample.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/pool_layer.hpp"
#include "runtime/nn/upsample_layer.hpp"

namespace tessera::app {
namespace {

// Walks the UNet's layers in the order runtime/train/unet.cpp builds them, carrying the
// sharded spec of the current value. Per-rank figures are reduced to the busiest rank.
class Walker {
 public:
  Walker(const UNetOptions& o, int ranks) : o_(o), ranks_(ranks) {}

  ShardSpec input(Index batch, const std::vector<Index>& grid) {
    std::vector<Index> shape = {batch, o_.in_channels};
    shape.insert(shape.end(), grid.begin(), grid.end());
    std::vector<Placement> dims(shape.size(), Replicate());
    dims[2] = Shard(0);  // the auto mesh: one domain axis over the first spatial dim
    return ShardSpec(shape, dims, std::vector<int>{ranks_});
  }

  ShardSpec conv(const std::string& name, const ShardSpec& in, Index cin, Index cout, Index kernel,
                 Index stride, Index pad, bool bias) {
    ConvOptions c;
    c.nd = o_.nd;
    c.in_channels = cin;
    c.out_channels = cout;
    c.kernel = {kernel};
    c.stride = {stride};
    c.padding = {pad};
    c.bias = bias;
    c.dtype = o_.dtype;
    const ConvNd layer(c);
    const ShardSpec out = layer.output_spec(in);
    std::vector<HaloReach> reach(static_cast<std::size_t>(in.ndim()), no_reach());
    for (int d = 0; d < o_.nd; ++d) reach[2 + d] = window_reach(layer.window(d), false);
    Index taps = 1;
    for (int d = 0; d < o_.nd; ++d) taps *= kernel;
    const Index weights = cout * cin * taps + (bias ? cout : 0);
    LayerVolume v = base(name, "conv", out);
    for (int b = 0; b < ranks_; ++b) {
      const double x = elems(in, b), y = elems(out, b);
      // Forward, backward-data and backward-weights: 2 * taps * C_in FLOPs per output each.
      v.flops = std::max(v.flops, 3 * 2.0 * static_cast<double>(taps * cin) * y);
      // Forward reads x, w and writes y; backward reads dy, x, w and writes dx, dw.
      v.bytes = std::max(v.bytes, (3 * x + 2 * y + 4.0 * static_cast<double>(weights)) * es());
    }
    halo(v, in, out, reach);
    params_ += weights;
    layers_.push_back(v);
    return out;
  }

  ShardSpec norm(const std::string& name, const ShardSpec& in, Index c) {
    if (o_.norm == UNetOptions::Norm::None) return in;
    const bool group = o_.norm == UNetOptions::Norm::Group;
    LayerVolume v = base(name, group ? "groupnorm" : "batchnorm", in);
    for (int b = 0; b < ranks_; ++b) {
      const double x = elems(in, b);
      v.flops = std::max(v.flops, 16 * x);        // two passes forward, two backward
      v.bytes = std::max(v.bytes, 7 * x * es());  // x twice, y; x, dy twice, dx
    }
    if (ranks_ > 1) {
      // Forward: sums, then deviations and squares; backward: two sums (norm_layers.cpp),
      // in float64, one value per (sample, group) or per channel.
      const Index count = group ? in.global_shape()[0] * o_.groups : c;
      v.allreduces = 3;
      v.allreduce_bytes = 5 * count * 8;
    }
    params_ += 2 * c;
    layers_.push_back(v);
    return in;
  }

  ShardSpec activation(const std::string& name, const ShardSpec& in) {
    LayerVolume v = base(name, "activation", in);
    for (int b = 0; b < ranks_; ++b) {
      const double x = elems(in, b);
      v.flops = std::max(v.flops, 30 * x);        // GELU's erf and its derivative
      v.bytes = std::max(v.bytes, 5 * x * es());  // x, y; x, dy, dx
    }
    layers_.push_back(v);
    return in;
  }

  ShardSpec pool(const std::string& name, const ShardSpec& in) {
    PoolOptions p;
    p.kernel.assign(static_cast<std::size_t>(o_.nd), 2);
    const Pool layer(p);
    const ShardSpec out = layer.output_spec(in);
    std::vector<HaloReach> reach(static_cast<std::size_t>(in.ndim()), no_reach());
    for (int d = 0; d < o_.nd; ++d) reach[2 + d] = window_reach(layer.window(d), false);
    LayerVolume v = base(name, "pool", out);
    for (int b = 0; b < ranks_; ++b) {
      const double x = elems(in, b), y = elems(out, b);
      v.flops = std::max(v.flops, x + y);
      v.bytes = std::max(v.bytes, (2 * x + 2 * y) * es());
    }
    halo(v, in, out, reach);
    layers_.push_back(v);
    return out;
  }

  ShardSpec upsample(const std::string& name, const ShardSpec& in) {
    UpsampleOptions u;
    u.scale.assign(static_cast<std::size_t>(o_.nd), 2);
    const Upsample layer(u);
    const ShardSpec out = layer.output_spec(in);
    std::vector<HaloReach> reach(static_cast<std::size_t>(in.ndim()), no_reach());
    for (int d = 0; d < o_.nd; ++d) {
      const Index L = in.global_shape()[static_cast<std::size_t>(2 + d)];
      reach[2 + d].range = [L](Index lo, Index hi) {
        Index a = 0, b = 0;
        kernels::upsample_input_range(kernels::UpsampleMode::Nearest, 2, L, lo, hi - lo, &a, &b);
        return std::pair<Index, Index>{a, b};
      };
    }
    LayerVolume v = base(name, "upsample", out);
    for (int b = 0; b < ranks_; ++b) {
      const double x = elems(in, b), y = elems(out, b);
      v.flops = std::max(v.flops, y);
      v.bytes = std::max(v.bytes, (2 * x + 2 * y) * es());
    }
    halo(v, in, out, reach);
    layers_.push_back(v);
    return out;
  }

  ShardSpec concat(const std::string& name, const ShardSpec& a, const ShardSpec& b) {
    std::vector<Index> shape = a.global_shape();
    shape[1] += b.global_shape()[1];
    const ShardSpec out(shape, a.placements(), a.mesh_dims());
    LayerVolume v = base(name, "concat", out);
    for (int r = 0; r < ranks_; ++r)
      v.bytes = std::max(v.bytes, 4 * elems(out, r) * es());  // copy in, split the gradient
    layers_.push_back(v);
    return out;
  }

  StepVolumes finish(const ShardSpec& input) {
    StepVolumes s;
    s.ranks = ranks_;
    s.input_shape = input.global_shape();
    s.layers = layers_;
    s.parameters = params_;
    s.elem_size = size_of(o_.dtype);
    s.grad_allreduce_bytes = ranks_ > 1 ? params_ * static_cast<std::int64_t>(s.elem_size) : 0;
    return s;
  }

 private:
  double es() const { return static_cast<double>(size_of(o_.dtype)); }
  double elems(const ShardSpec& s, int rank) const {
    return static_cast<double>(s.local_box({rank}).volume());
  }
  LayerVolume base(const std::string& name, const std::string& kind, const ShardSpec& out) const {
    LayerVolume v;
    v.name = name;
    v.kind = kind;
    v.out_shape = out.global_shape();
    for (int b = 0; b < ranks_; ++b) v.out_bytes = std::max(v.out_bytes, elems(out, b) * es());
    return v;
  }
  // The halo of a window layer as WindowPlan plans it (runtime/nn/window_layout.cpp): the
  // geometry of the haloed and driving partitions, an exchange where any block has ghosts.
  // Forward sends the owned cells others need; the adjoint sends the ghosts back.
  void halo(LayerVolume& v, const ShardSpec& in, const ShardSpec& out,
            const std::vector<HaloReach>& reach) const {
    const WindowHalo wh(in.partition(), out.partition(), reach);
    if (!wh.any_ghosts()) return;
    const HaloGeometry g(in.partition(), wh.widths(), wh.periodic());
    v.halo_exchanges = 2;
    for (int b = 0; b < ranks_; ++b) {
      const HaloPlan& p = g.plan(b);
      Index cells = 0;
      int messages = 0;
      for (const HaloSend& s : p.sends)
        if (s.peer != b) cells += s.src.volume(), ++messages;
      for (const HaloRecv& r : p.recvs)
        if (r.peer != b) cells += r.dst.volume(), ++messages;
      v.halo_bytes = std::max(v.halo_bytes, cells * static_cast<std::int64_t>(es()));
      v.halo_messages = std::max(v.halo_messages, messages);
    }
  }

  const UNetOptions& o_;
  int ranks_;
  std::vector<LayerVolume> layers_;
  Index params_ = 0;
};

template <class F>
double sum_of(const std::vector<LayerVolume>& ls, F f) {
  double s = 0;
  for (const auto& l : ls) s += static_cast<double>(f(l));
  return s;
}

}  // namespace

double StepVolumes::flops() const {
  return sum_of(layers, [](const LayerVolume& l) { return l.flops; });
}
double StepVolumes::bytes() const {
  return sum_of(layers, [](const LayerVolume& l) { return l.bytes; });
}
double StepVolumes::activation_bytes() const {
  return sum_of(layers, [](const LayerVolume& l) { return l.out_bytes; });
}
std::int64_t StepVolumes::halo_bytes() const {
  return static_cast<std::int64_t>(
      sum_of(layers, [](const LayerVolume& l) { return l.halo_bytes; }));
}
int StepVolumes::halo_messages() const {
  return static_cast<int>(sum_of(layers, [](const LayerVolume& l) { return l.halo_messages; }));
}
std::int64_t StepVolumes::stat_allreduce_bytes() const {
  return static_cast<std::int64_t>(
      sum_of(layers, [](const LayerVolume& l) { return l.allreduce_bytes; }));
}
int StepVolumes::stat_allreduces() const {
  return static_cast<int>(sum_of(layers, [](const LayerVolume& l) { return l.allreduces; }));
}

StepVolumes dry_run(const UNetOptions& o, Index batch, const std::vector<Index>& grid, int ranks) {
  TESSERA_CHECK(ranks >= 1, "dry run: " << ranks << " ranks");
  TESSERA_CHECK(static_cast<int>(grid.size()) == o.nd,
                "dry run: a " << grid.size() << "-D grid for a " << o.nd << "-D model");
  TESSERA_CHECK(o.down == UNetOptions::Down::Pool && o.up == UNetOptions::Up::Upsample,
                "dry run: models with pooling down and upsampling up only (model.down = "
                "\"pool\", model.up = \"upsample\")");
  UNet reference(o);  // the parameter count the walk must reproduce
  std::vector<Index> shape = {batch, o.in_channels};
  shape.insert(shape.end(), grid.begin(), grid.end());
  const std::string problem = reference.input_problem(shape);
  TESSERA_CHECK(problem.empty(), "dry run: " << problem);
  // As the trainer demands: every rank holds rows at the coarsest level.
  TESSERA_CHECK((grid[0] >> o.depth) >= ranks,
                "dry run: grid " << shape_str(grid) << " has " << (grid[0] >> o.depth)
                                 << " cells along dim 0 at the UNet's coarsest level (depth "
                                 << o.depth << "), fewer than its " << ranks << " domain ranks");

  Walker w(o, ranks);
  const ShardSpec input = w.input(batch, grid);
  std::vector<Index> ch;
  for (int l = 0; l <= o.depth; ++l) ch.push_back(o.width << l);
  const bool bias = o.norm == UNetOptions::Norm::None;
  auto block = [&](const std::string& name, ShardSpec x, Index cin, Index cout) {
    for (int i = 1; i <= 2; ++i) {
      const std::string n = name + ".conv" + std::to_string(i);
      x = w.conv(n, x, i == 1 ? cin : cout, cout, o.kernel, 1, o.kernel / 2, bias);
      x = w.norm(name + ".norm" + std::to_string(i), x, cout);
      x = w.activation(name + ".act" + std::to_string(i), x);
    }
    return x;
  };
  std::vector<ShardSpec> skips;
  ShardSpec x = input;
  Index cin = o.in_channels;
  for (int l = 0; l <= o.depth; ++l) {
    const std::string lv = std::to_string(l);
    x = block(l < o.depth ? "enc" + lv : "mid", x, cin, ch[l]);
    cin = ch[l];
    if (l == o.depth) break;
    skips.push_back(x);
    x = w.pool("down" + lv, x);
  }
  for (int l = o.depth - 1; l >= 0; --l) {
    const std::string lv = std::to_string(l);
    x = w.upsample("up" + lv, x);
    x = w.concat("skip" + lv, x, skips[static_cast<std::size_t>(l)]);
    x = block("dec" + lv, x, ch[l + 1] + ch[l], ch[l]);
  }
  w.conv("head", x, ch[0], o.out_channels, 1, 1, 0, true);
  StepVolumes v = w.finish(input);

  Index ref_params = 0;
  for (const auto& np : reference.graph().parameters()) ref_params += np.param->value.numel();
  TESSERA_CHECK(v.parameters == ref_params, "dry run: the walk counts "
                                                << v.parameters << " parameters, the UNet has "
                                                << ref_params << " (the walk is out of date)");
  return v;
}

std::string dry_run_table(const StepVolumes& v) {
  std::ostringstream os;
  os << "dry run: UNet on " << shape_str(v.input_shape) << " over " << v.ranks
     << " domain rank(s) (first spatial dim split), " << v.parameters
     << " parameters; per step, busiest rank:\n";
  os << std::left << std::setw(14) << "layer" << std::setw(11) << "kind" << std::right
     << std::setw(22) << "output" << std::setw(12) << "MFLOP" << std::setw(11) << "MB"
     << std::setw(12) << "halo bytes" << std::setw(6) << "msgs" << std::setw(14) << "allreduce B"
     << '\n';
  for (const auto& l : v.layers)
    os << std::left << std::setw(14) << l.name << std::setw(11) << l.kind << std::right
       << std::setw(22) << shape_str(l.out_shape) << std::setw(12) << std::fixed
       << std::setprecision(2) << l.flops / 1e6 << std::setw(11) << l.bytes / 1e6 << std::setw(12)
       << l.halo_bytes << std::setw(6) << l.halo_messages << std::setw(14) << l.allreduce_bytes
       << '\n';
  os << std::defaultfloat << std::setprecision(4) << "total: " << v.flops() / 1e9 << " GFLOP, "
     << v.bytes() / 1e6 << " MB of local kernel traffic, halo " << v.halo_bytes() << " bytes in "
     << v.halo_messages() << " messages, statistics all-reduce " << v.stat_allreduce_bytes()
     << " bytes in " << v.stat_allreduces() << " calls, gradient all-reduce "
     << v.grad_allreduce_bytes << " bytes\n";
  return os.str();
}

std::string dry_run_json(const StepVolumes& v) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : v.layers)
    layers.push_back({{"name", l.name},
                      {"kind", l.kind},
                      {"out_shape", l.out_shape},
                      {"flops", l.flops},
                      {"bytes", l.bytes},
                      {"out_bytes", l.out_bytes},
                      {"halo_bytes", l.halo_bytes},
                      {"halo_exchanges", l.halo_exchanges},
                      {"halo_messages", l.halo_messages},
                      {"allreduce_bytes", l.allreduce_bytes},
                      {"allreduces", l.allreduces}});
  const nlohmann::json j = {{"ranks", v.ranks},
                            {"input_shape", v.input_shape},
                            {"parameters", v.parameters},
                            {"elem_size", v.elem_size},
                            {"flops", v.flops()},
                            {"bytes", v.bytes()},
                            {"activation_bytes", v.activation_bytes()},
                            {"halo_bytes", v.halo_bytes()},
                            {"halo_messages", v.halo_messages()},
                            {"stat_allreduce_bytes", v.stat_allreduce_bytes()},
                            {"stat_allreduces", v.stat_allreduces()},
                            {"grad_allreduce_bytes", v.grad_allreduce_bytes},
                            {"layers", layers}};
  return j.dump(2) + "\n";
}

}  // namespace tessera::app
