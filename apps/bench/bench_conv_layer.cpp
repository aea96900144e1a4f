// Case "conv", the sharded conv layer ("conv-kernel" times the local kernels alone):
// Conv2d 32->32 3x3 on 1x32x2048x2048 and Conv3d 16->16 3x3x3 on 1x16x256^3, float32,
// forward + backward (data, weights, bias), on the host.
//  (a) one rank: the sharded layer against the bare oneDNN primitives (forward, backward
//      data, backward weights with bias) on the same input, timed alternately rep by rep;
//  (b) domain-parallel efficiency E = T(1 rank, 1 thread) / (min(N, cores) x T(N ranks,
//      1 thread each)), from rows run with --threads=1 (the case sets the OpenMP thread
//      count itself; default cores per node / ranks per node);
//  (c) peak memory per rank against (one-rank peak / N + this rank's ghost bytes), measured
//      in a pass where the caller keeps neither x nor y, as a network does.
// At more than one rank it also times the layer with ConvOptions::overlap (t_overlap_s).
// Every timed path's output and input gradient is checked untimed at sampled points of each
// rank's block, its faces first, against float64 sums (max_error, correct).
// Options: --n2d (one size or a list: --n2d=1024,2048) --c2d --n3d --c3d, --which=2d,3d,
// --reps, --warmup, --threads.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <thread>
#include <tuple>

#include "apps/bench/cases.hpp"
#include "apps/bench/result_check.hpp"
#include "apps/bench/timing.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "kernels/cpu/conv_dnnl.hpp"
#include "kernels/device/memory.hpp"

namespace tessera::bench {
namespace {

// The bare oneDNN primitives of the same conv on a whole (unsharded) tensor: the activation
// layout the library picks (plain, or channels-last copies reordered from and to the
// caller's plain arrays around each execute, as the library does), weights in the layouts
// oneDNN prefers for each pass (reordered once, outside the timing).
struct BareDnnl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::memory x, y, dy, dx, w, w_bd, dw, b, db;  // w_bd: the weights as backward data wants them
  bool cl = false;
  dnnl::memory x_user, y_user, dy_user, dx_user;  // channels-last: the caller's plain arrays
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_w;

  BareDnnl(const std::vector<Index>& xs, const std::vector<Index>& ws, const std::vector<Index>& ys,
           const Tensor& xt, const Tensor& wt, const Tensor& bt, const Tensor& dyt,
           const Tensor& dxt, bool channels_last)
      : cl(channels_last) {
    using dnnl::memory;
    using tag = memory::format_tag;
    const auto f32 = memory::data_type::f32;
    const int nd = static_cast<int>(xs.size()) - 2;
    const tag plain = nd == 2 ? tag::nchw : tag::ncdhw, wt_tag = nd == 2 ? tag::oihw : tag::oidhw;
    const tag act = cl ? (nd == 2 ? tag::nhwc : tag::ndhwc) : plain;
    memory::dims xd(xs.begin(), xs.end()), wd(ws.begin(), ws.end()), yd(ys.begin(), ys.end());
    memory::dims bd = {ws[0]}, strides(nd, 1), dil(nd, 0), pad(nd, 1);
    const memory::desc x_md(xd, f32, act), y_md(yd, f32, act), b_md(bd, f32, tag::x);
    const memory::desc w_any(wd, f32, tag::any), w_plain(wd, f32, wt_tag);
    const dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                             dnnl::algorithm::convolution_direct, x_md, w_any, b_md,
                                             y_md, strides, dil, pad, pad);
    const dnnl::convolution_forward::primitive_desc fpd(fd, eng);
    const dnnl::convolution_backward_data::desc bd_d(dnnl::algorithm::convolution_direct, x_md,
                                                     w_any, y_md, strides, dil, pad, pad);
    const dnnl::convolution_backward_data::primitive_desc bpd(bd_d, eng, fpd);
    const dnnl::convolution_backward_weights::desc bw_d(dnnl::algorithm::convolution_direct, x_md,
                                                        w_any, b_md, y_md, strides, dil, pad, pad);
    const dnnl::convolution_backward_weights::primitive_desc wpd(bw_d, eng, fpd);
    if (cl) {
      x_user = memory({xd, f32, plain}, eng, xt.raw());
      dy_user = memory({yd, f32, plain}, eng, dyt.raw());
      dx_user = memory({xd, f32, plain}, eng, dxt.raw());
      y_user = memory({yd, f32, plain}, eng);
      x = memory(x_md, eng);
      dy = memory(y_md, eng);
      dx = memory(x_md, eng);
    } else {
      x = memory(x_md, eng, xt.raw());
      dy = memory(y_md, eng, dyt.raw());
      dx = memory(x_md, eng, dxt.raw());
    }
    y = memory(y_md, eng);
    b = memory(b_md, eng, bt.raw());
    db = memory(b_md, eng);
    memory w_user(w_plain, eng, wt.raw());
    w = memory(fpd.weights_desc(), eng);
    dnnl::reorder(w_user, w).execute(strm, w_user, w);
    w_bd = memory(bpd.weights_desc(), eng);
    dnnl::reorder(w_user, w_bd).execute(strm, w_user, w_bd);
    dw = memory(wpd.diff_weights_desc(), eng);
    fwd = dnnl::convolution_forward(fpd);
    bwd_data = dnnl::convolution_backward_data(bpd);
    bwd_w = dnnl::convolution_backward_weights(wpd);
    strm.wait();
  }
  // The library reorders x once per pass that reads it (forward and backward weights) and dy
  // once per pass (backward data and backward weights): so does this.
  void run() {
    if (cl) dnnl::reorder(x_user, x).execute(strm, x_user, x);
    fwd.execute(strm,
                {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}});
    if (cl) dnnl::reorder(y, y_user).execute(strm, y, y_user);
    if (cl) dnnl::reorder(dy_user, dy).execute(strm, dy_user, dy);
    bwd_data.execute(strm,
                     {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w_bd}, {DNNL_ARG_DIFF_SRC, dx}});
    if (cl) dnnl::reorder(dx, dx_user).execute(strm, dx, dx_user);
    if (cl) dnnl::reorder(x_user, x).execute(strm, x_user, x);
    if (cl) dnnl::reorder(dy_user, dy).execute(strm, dy_user, dy);
    bwd_w.execute(strm, {{DNNL_ARG_SRC, x},
                         {DNNL_ARG_DIFF_DST, dy},
                         {DNNL_ARG_DIFF_WEIGHTS, dw},
                         {DNNL_ARG_DIFF_BIAS, db}});
    strm.wait();
  }
  // The forward output in the caller's plain layout.
  const float* y_plain() const {
    return static_cast<const float*>((cl ? y_user : y).get_data_handle());
  }
};

double max_over(MPI_Comm comm, double v) {
  double m = v;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, comm);
  return m;
}

// The layer's input as its producer in a graph writes it: into the conv's ghost room
// (a plain shard where the layer exchanges nothing).
ShardTensor input_in_room(ConvNd& layer, const Mesh& mesh, const ShardSpec& spec, unsigned seed) {
  const Tensor v = hashed_block(spec, mesh.coords(), seed);
  const HaloWidths room = layer.input_room(mesh, spec);
  if (room.empty()) return ShardTensor(mesh, spec, v);
  const ShardTensor x = ShardTensor::with_room(mesh, spec, room, v.dtype(), v.space());
  x.local().copy_from(v);
  return x;
}

json run_one(Context& ctx, const cli::Args& opt, int nd, Index n, Index c, int threads) {
  const int reps = reps_option(opt);
  const int warmup = int_option(opt, "warmup", 0);
  std::vector<Index> shape = {1, c};
  for (int d = 0; d < nd; ++d) shape.push_back(n);
  const std::vector<Index> spatial(shape.begin() + 2, shape.end());
  Mesh mesh = Mesh::for_grid(ctx.world(), spatial);
  std::vector<Placement> dims = {Replicate(), Replicate()};
  for (int d = 0; d < nd; ++d) dims.push_back(Shard(d));
  const ShardSpec spec(shape, dims, mesh);

  ConvOptions o;
  o.nd = nd;
  o.in_channels = o.out_channels = c;
  o.kernel = {3};
  o.padding = {1};
  ConvNd layer(o);
  const ShardSpec out_spec = layer.output_spec(spec);
  const auto coords = mesh.coords();
  // The input and the output gradient are hashes of the global index, so every rank can
  // compute the answer at any point of its block (the untimed check below).
  const unsigned seed = 1, dy_seed = 8;

  // (c) memory, network-like: x handed over and dropped, dy made while y lives, y dropped.
  release_cached_host_memory();
  reset_peak_memory(MemSpace::Host);
  const double base = static_cast<double>(memory_stats(MemSpace::Host).current);
  {
    ShardTensor dx;
    {
      ShardTensor dy;
      {
        ShardTensor y;
        { y = layer.forward(input_in_room(layer, mesh, spec, seed)); }
        dy = ShardTensor(mesh, out_spec, hashed_block(out_spec, coords, dy_seed));
      }
      dx = layer.backward_in_room(dy);
    }
  }
  const double peak = static_cast<double>(memory_stats(MemSpace::Host).peak) - base;
  // This rank's ghost bytes: the input's room (forward) and the padded gradient (backward),
  // one padded buffer's ghosts each.
  std::vector<HaloReach> reach = {no_reach(), no_reach()};
  for (int d = 0; d < nd; ++d) reach.push_back(window_reach(layer.window(d), false));
  const WindowHalo wh(spec.partition(), out_spec.partition(), reach);
  const BlockWindow& bw = wh.block(block_of(mesh, spec));
  const double ghost_bytes =
      4.0 * static_cast<double>(grow(bw.owned, bw.left, bw.right).volume() - bw.owned.volume());

  // Timing: x and dy held by the caller, forward + backward per repetition, as in a graph:
  // x written by its producer into the conv's ghost room, dx left in its frame (the layer's
  // consumer reads it in place). Plain shards (a copy into a padded buffer and a clone
  // back) are timed alternately with it.
  const ShardTensor x = input_in_room(layer, mesh, spec, seed);
  const ShardTensor x_plain = x.without_room();
  const ShardTensor dy(mesh, out_spec, hashed_block(out_spec, coords, dy_seed));
  auto step = [&] {
    layer.forward(x);
    layer.backward_in_room(dy);
  };
  auto step_plain = [&] {
    layer.forward(x_plain);
    layer.backward(dy);
  };
  // At one rank the bare primitives are the baseline: built here and timed alternately with
  // the layer, rep by rep, so both see the same load on a shared machine.
  const Tensor dxt = mesh.size() == 1 ? Tensor::empty(shape, DType::f32) : Tensor();
  std::unique_ptr<BareDnnl> bare;
  if (mesh.size() == 1) {
    // The layout the library runs this conv in (the same for its three passes here).
    kernels::ConvDesc whole;
    whole.nd = nd, whole.n = shape[0], whole.c_in = shape[1];
    whole.c_out = layer.weight().value.shape(0);
    for (int d = 0; d < nd; ++d)
      whole.in[d] = shape[static_cast<std::size_t>(d) + 2],
      whole.kernel[d] = layer.weight().value.shape(d + 2), whole.pad_lo[d] = whole.pad_hi[d] = 1;
    bare =
        std::make_unique<BareDnnl>(shape, layer.weight().value.shape(), out_spec.global_shape(),
                                   x.local(), layer.weight().value, layer.bias()->value, dy.local(),
                                   dxt, kernels::dnnl_conv::info(whole).channels_last_forward);
  }
  Timing t, tb, tp;
  if (bare)
    std::tie(t, tb) = time_interleaved(mesh.comm(), reps, warmup, step, [&] { bare->run(); });
  else
    std::tie(t, tp) = time_interleaved(mesh.comm(), reps, warmup, step, step_plain);
  json row = {{"conv", std::to_string(nd) + "d"},
              {"shape", shape_str(shape)},
              {"ranks", mesh.size()},
              {"mesh", mesh.str()},
              {"threads", threads},
              {"cores", std::max(1, omp_get_num_procs())},
              {"t_layer_s", t.median_s},
              {"t_layer_min_s", t.min_s},
              {"peak_mib", max_over(mesh.comm(), peak) / (1 << 20)},
              {"ghost_mib", max_over(mesh.comm(), ghost_bytes) / (1 << 20)}};
  // Untimed: the layer's output and input gradient (and the overlapped layer's) at sampled
  // points of every rank's block, its faces first, against float64 sums.
  const auto check = [&](ConvNd& l, const ShardTensor& in, bool in_room) {
    const ShardTensor y = l.forward(in), dx = in_room ? l.backward_in_room(dy) : l.backward(dy);
    return sampled_conv_error(spec, coords, l.weight().value, l.bias()->value, seed, dy_seed,
                              y.local(), dx.local());
  };
  double err = check(layer, x, true);
  if (mesh.size() > 1) {
    err = std::max(err, check(layer, x_plain, false));
    row["t_plain_s"] = tp.median_s;
    // The same layer with the interior computed while the halo travels.
    ConvOptions ov = o;
    ov.overlap = true;
    ConvNd overlapped(ov);
    const Timing to = time_collective(mesh.comm(), reps, warmup, [&] {
      overlapped.forward(x);
      overlapped.backward(dy);
    });
    row["t_overlap_s"] = to.median_s;
    row["overlap_speedup"] = t.median_s / to.median_s;
    err = std::max(err, check(overlapped, x, false));
  }
  if (bare) {
    // The two must compute the same thing: compare the forward outputs.
    const Tensor y = layer.forward(x).local().contiguous();
    const double diff =
        rel_max_diff(y.data<float>(), bare->y_plain(), static_cast<std::size_t>(y.numel()));
    row["t_bare_s"] = tb.median_s;
    row["overhead"] = t.median_s / tb.median_s - 1.0;
    row["y_rel_diff"] = diff;
    err = std::max(err, diff);
  }
  row["max_error"] = max_over(mesh.comm(), err);
  row["correct"] = double(row["max_error"]) <= 1e-4;
  return row;
}

json run(Context& ctx, const cli::Args& opt) {
  const int threads = opt.has("threads") ? threads_option(opt) : ctx.node_share_threads();
  omp_set_num_threads(threads);
  const auto which = opt.choices("which", {"2d", "3d"});
  json rows = json::array();
  if (which.count("2d")) {
    for (double n : opt.numbers("n2d")) {
      // Whole sides in range (2.7 was cut to 2; nan or 1e30 wrapped in the cast).
      if (!(n >= 1 && n <= double(Index{1} << 20) && n == std::floor(n)))
        throw Error("option --n2d: " + std::to_string(n) + " is not a grid side 1..1048576");
      rows.push_back(run_one(ctx, opt, 2, static_cast<Index>(n), size_option(opt, "c2d"), threads));
    }
  }
  if (which.count("3d"))
    rows.push_back(run_one(ctx, opt, 3, opt.integer_in("n3d", 1, Index{1} << 20),
                           size_option(opt, "c3d"), threads));
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  bool correct = true;
  for (const auto& r : rows)
    correct = correct && r.contains("correct") && r.at("correct").get<bool>();
  g.push_back(goal("every result checked correct", correct ? 1 : 0, "==", 1));
  for (const auto& one : rows) {
    if (one.at("ranks") != 1) continue;
    const std::string what =
        "conv" + std::string(one.at("conv")) + " " + std::string(one.at("shape"));
    if (one.contains("overhead"))
      g.push_back(goal(what + " 1 rank, " + std::to_string(int(one.at("threads"))) +
                           " thr: layer time / bare oneDNN - 1",
                       one.at("overhead"), "<=", 0.05));
    for (const auto& r : rows) {
      if (r.at("conv") != one.at("conv") || r.at("shape") != one.at("shape") || r.at("ranks") == 1)
        continue;
      if (r.at("threads") != one.at("threads")) continue;
      const int n = r.at("ranks");
      if (one.at("threads") == 1 && r.at("threads") == 1) {
        // Plain efficiency: one thread per rank, against one rank with one thread.
        const int used = std::min(n, int(r.value("cores", n)));
        g.push_back(goal(what + " E = T(1 rank) / (" + std::to_string(used) + " x T(" +
                             std::to_string(n) + " ranks)), 1 thread each",
                         double(one.at("t_layer_s")) / (used * double(r.at("t_layer_s"))),
                         ">=", 0.95));
      }
      const double ideal = double(one.at("peak_mib")) / n + double(r.at("ghost_mib"));
      g.push_back(
          goal(what + " |peak per rank / (1-rank peak / " + std::to_string(n) + " + ghosts) - 1|",
               std::fabs(double(r.at("peak_mib")) / ideal - 1.0), "<=", 0.10));
    }
  }
  return g;
}

}  // namespace

Case conv_case() {
  Case c;
  c.name = "conv";
  c.help = "sharded Conv2d/Conv3d forward+backward vs bare oneDNN, rank scaling, peak memory";
  c.options = {{"n2d", "N[,N...]", "Conv2d grid side(s), one row each", "2048"},
               {"c2d", "C", "Conv2d channels", "32"},
               {"n3d", "N", "Conv3d grid side", "256"},
               {"c3d", "C", "Conv3d channels", "16"},
               {"which", "LIST", "which layers: 2d, 3d or both", "2d,3d"},
               {"reps", "N", "timed repetitions", "5"},
               {"warmup", "N", "untimed repetitions first", "1"},
               {"threads", "N", "OpenMP threads per rank (default cores per node / ranks)", ""}};
  c.rank_counts = {1, 2, 4};
  c.columns = {"conv",      "shape",     "ranks",      "mesh",        "threads",
               "t_layer_s", "t_bare_s",  "overhead",   "t_overlap_s", "overlap_speedup",
               "peak_mib",  "ghost_mib", "y_rel_diff", "max_error",   "correct"};
  c.run = run;
  c.goals = goals;
  return c;
}

}  // namespace tessera::bench
