// Case "conv-kernel": the local convolution kernels, one rank. Conv2d 32->32 3x3 on
// 1x32xHxW (--hw=512) and Conv3d 16->16 3x3x3 on 1x16xD^3 (--d=64), padding 1, float32
// (--dtype=f64 for the float64 path): forward, backward-data and backward-weights (with
// bias grad) on host memory (oneDNN) and, where a device exists, on device memory
// (cuDNN). The host forward is also timed as a bare oneDNN primitive execute on the same
// buffers (built like the library's, weights pre-reordered), interleaved with the library's call,
// so the row shows what the library's call adds: cache look-up, memory wrappers, weight reorder,
// locking.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <functional>
#include <random>
#include <unordered_map>

#include "apps/bench/cases.hpp"
#include "apps/bench/timing.hpp"
#include "kernels/conv.hpp"
#include "kernels/cpu/conv_dnnl.hpp"
#include "kernels/device/device.hpp"

namespace tessera::bench {
namespace {

using kernels::ConvDesc;

ConvDesc problem(int nd, Index c, Index extent, DType t) {
  ConvDesc d;
  d.nd = nd, d.type = t, d.n = 1, d.c_in = d.c_out = c;
  for (int i = 0; i < nd; ++i) d.in[i] = extent, d.kernel[i] = 3, d.pad_lo[i] = d.pad_hi[i] = 1;
  return d;
}

// Host buffers of one problem, filled with values in [-1, 1].
struct Buffers {
  std::vector<char> x, w, b, y, dx, dw, db;
  explicit Buffers(const ConvDesc& c) {
    const std::size_t e = size_of(c.type);
    auto fill = [&](std::vector<char>& v, Index n) {
      v.resize(static_cast<std::size_t>(n) * e);
      std::mt19937 g(7);
      std::uniform_real_distribution<double> u(-1, 1);
      for (Index i = 0; i < n; ++i) {
        if (c.type == DType::f32)
          reinterpret_cast<float*>(v.data())[i] = static_cast<float>(u(g));
        else
          reinterpret_cast<double*>(v.data())[i] = u(g);
      }
    };
    fill(x, c.x_elems()), fill(w, c.w_elems()), fill(b, c.c_out), fill(y, c.y_elems());
    fill(dx, c.x_elems()), fill(dw, c.w_elems()), fill(db, c.c_out);
  }
};

// The bare oneDNN forward on the same buffers: same descriptors as the library, weights
// reordered once at construction.
class BareForward {
 public:
  BareForward(const ConvDesc& c, Buffers& b) : eng_(dnnl::engine::kind::cpu, 0), s_(eng_) {
    using dnnl::memory;
    memory::dims x = {c.n, c.c_in}, w = {c.c_out, c.c_in}, y = {c.n, c.c_out}, st, dl, pl, pr;
    for (int d = 0; d < c.nd; ++d) {
      x.push_back(c.in[d]), w.push_back(c.kernel[d]), y.push_back(c.out(d));
      st.push_back(c.stride[d]), dl.push_back(c.dilation[d] - 1);
      pl.push_back(c.pad_lo[d]), pr.push_back(c.pad_hi[d]);
    }
    const auto f32 = memory::data_type::f32;
    const auto plain = c.nd == 1   ? memory::format_tag::ncw
                       : c.nd == 2 ? memory::format_tag::nchw
                                   : memory::format_tag::ncdhw;
    const auto wplain = c.nd == 1   ? memory::format_tag::oiw
                        : c.nd == 2 ? memory::format_tag::oihw
                                    : memory::format_tag::oidhw;
    const memory::desc xmd(x, f32, plain), ymd(y, f32, plain),
        bmd({c.c_out}, f32, memory::format_tag::x), wmd(w, f32, wplain),
        wany(w, f32, memory::format_tag::any);
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct, xmd, wany, bmd, ymd,
                                        st, dl, pl, pr),
        eng_);
    memory wu(wmd, eng_, b.w.data());
    args_ = {{DNNL_ARG_SRC, memory(xmd, eng_, b.x.data())},
             {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), eng_)},
             {DNNL_ARG_BIAS, memory(bmd, eng_, b.b.data())},
             {DNNL_ARG_DST, memory(ymd, eng_, b.y.data())}};
    dnnl::reorder(wu, args_[DNNL_ARG_WEIGHTS]).execute(s_, wu, args_[DNNL_ARG_WEIGHTS]);
    prim_ = dnnl::convolution_forward(pd);
  }
  void operator()() {
    prim_.execute(s_, args_);
    s_.wait();
  }

 private:
  dnnl::engine eng_;
  dnnl::stream s_;
  std::unordered_map<int, dnnl::memory> args_;
  dnnl::convolution_forward prim_;
};

// Times a and b alternately (a, b, a, b, ...) so that the drift of a shared machine
// hits both alike; returns the medians and minima.
struct Paired {
  double a_med, b_med, a_min, b_min;
};
Paired time_paired(int reps, const std::function<void()>& a, const std::function<void()>& b) {
  a(), b();  // warm-up
  std::vector<double> ta, tb;
  for (int i = 0; i < reps; ++i) {
    double t0 = MPI_Wtime();
    a();
    ta.push_back(MPI_Wtime() - t0);
    t0 = MPI_Wtime();
    b();
    tb.push_back(MPI_Wtime() - t0);
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2], ta.front(), tb.front()};
}

json run(Context& ctx, const cli::Args& opt) {
  const int reps = reps_option(opt);
  const std::string dtype = opt.str("dtype");
  TESSERA_CHECK(dtype == "f32" || dtype == "f64", "option --dtype " << dtype << ": f32 or f64");
  const DType type = dtype == "f64" ? DType::f64 : DType::f32;
  const std::vector<std::pair<std::string, ConvDesc>> problems = {
      {"conv2d", problem(2, 32, size_option(opt, "hw"), type)},
      {"conv3d", problem(3, 16, size_option(opt, "d"), type)}};
  const bool gpu = device::count() > 0;
  json rows = json::array();
  for (const auto& [name, c] : problems) {
    const double gflop = c.flops_forward() / 1e9;  // each of the three passes
    Buffers b(c);
    std::string impl[3] = {"direct (OpenMP)", "direct (OpenMP)", "direct (OpenMP)"};
    if (type == DType::f32) {
      const auto i = kernels::dnnl_conv::info(c);
      impl[0] = i.forward, impl[1] = i.backward_data, impl[2] = i.backward_weights;
      // What the library does besides oneDNN's execute (nothing, for plain layouts).
      const std::string extra = std::string(i.reorders_weights ? " +weight reorder" : "") +
                                (i.stages_x ? " +x staging" : "");
      for (auto& s : impl) s += extra;
    }
    // Forward: the library's call and, in float32, the bare oneDNN execute, interleaved.
    auto fwd = [&] {
      kernels::conv_forward(Device::host(), c, b.x.data(), b.w.data(), b.b.data(), b.y.data());
    };
    Timing tf;
    Paired pf{};
    if (type == DType::f32) {
      BareForward bare(c, b);
      pf = time_paired(reps, fwd, [&] { bare(); });
      tf = {pf.a_med, pf.a_min};
    } else {
      tf = time_collective(ctx.world(), reps, 1, fwd);
    }
    const Timing td = time_collective(ctx.world(), reps, 1, [&] {
      kernels::conv_backward_data(Device::host(), c, b.y.data(), b.w.data(), b.dx.data());
    });
    const Timing tw = time_collective(ctx.world(), reps, 1, [&] {
      kernels::conv_backward_weights(Device::host(), c, b.x.data(), b.y.data(), b.dw.data(),
                                     b.db.data());
    });
    const std::string pass[3] = {"forward", "backward_data", "backward_weights"};
    const Timing* t[3] = {&tf, &td, &tw};
    for (int p = 0; p < 3; ++p) {
      json r = {{"problem", name},
                {"shape", std::to_string(c.n) + "x" + std::to_string(c.c_in) + "x" +
                              std::to_string(c.in[0]) + "^" + std::to_string(c.nd)},
                {"dtype", name_of(type)},
                {"memory", "host"},
                {"pass", pass[p]},
                {"impl", impl[p]},
                {"ms", t[p]->median_s * 1e3},
                {"GFLOPs", gflop / t[p]->median_s}};
      if (p == 0 && type == DType::f32) {
        r["bare_ms"] = pf.b_med * 1e3;
        r["overhead_pct"] = (pf.a_med / pf.b_med - 1) * 100;
        r["min_ms"] = pf.a_min * 1e3;
        r["bare_min_ms"] = pf.b_min * 1e3;
        r["overhead_min_pct"] = (pf.a_min / pf.b_min - 1) * 100;
      }
      rows.push_back(r);
    }
    if (!gpu) continue;
    auto up = [&](const std::vector<char>& h) {
      void* d = device::alloc(h.size());
      device::copy(d, h.data(), h.size(), device::Copy::HostToDevice);
      return d;
    };
    void *x = up(b.x), *w = up(b.w), *bias = up(b.b), *y = up(b.y), *dx = up(b.dx), *dw = up(b.dw),
         *db = up(b.db);
    // Kernels are queued on the stream: each timed call waits for its own work.
    const Device dev = Device::cuda();
    const Timing gf = time_collective(ctx.world(), reps, 1, [&] {
      kernels::conv_forward(dev, c, x, w, bias, y);
      device::synchronize(dev);
    });
    const Timing gd = time_collective(ctx.world(), reps, 1, [&] {
      kernels::conv_backward_data(dev, c, y, w, dx);
      device::synchronize(dev);
    });
    const Timing gw = time_collective(ctx.world(), reps, 1, [&] {
      kernels::conv_backward_weights(dev, c, x, y, dw, db);
      device::synchronize(dev);
    });
    for (void* p : {x, w, bias, y, dx, dw, db}) device::free(p);
    const Timing* g[3] = {&gf, &gd, &gw};
    for (int p = 0; p < 3; ++p)
      rows.push_back({{"problem", name},
                      {"shape", std::to_string(c.n) + "x" + std::to_string(c.c_in) + "x" +
                                    std::to_string(c.in[0]) + "^" + std::to_string(c.nd)},
                      {"dtype", name_of(type)},
                      {"memory", "device"},
                      {"pass", pass[p]},
                      {"impl", "cuDNN"},
                      {"ms", g[p]->median_s * 1e3},
                      {"GFLOPs", gflop / g[p]->median_s}});
  }
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  for (const auto& r : rows)
    if (r.contains("overhead_pct"))
      g.push_back(goal("library call vs bare oneDNN execute, " +
                           r.at("problem").get<std::string>() + " forward (ratio)",
                       r.at("bare_ms").get<double>() / r.at("ms").get<double>(), ">=", 0.95));
  return g;
}

}  // namespace

Case conv_kernel_case() {
  return {"conv-kernel",
          "local conv fwd/bwd: Conv2d 32->32 3x3 on 1x32xHxW (--hw=512), Conv3d 16->16 3x3x3 on "
          "1x16xD^3 (--d=64); host (oneDNN) and device (cuDNN); --dtype=f32|f64 --reps=5",
          {{"hw", "N", "Conv2d grid side", "512"},
           {"d", "N", "Conv3d grid side", "64"},
           {"dtype", "T", "f32 or f64", "f32"},
           {"reps", "N", "timed repetitions", "5"}},
          {1},
          {"problem", "shape", "dtype", "memory", "pass", "impl", "ms", "GFLOPs", "bare_ms",
           "overhead_pct", "min_ms", "bare_min_ms", "overhead_min_pct"},
          run,
          goals};
}

}  // namespace tessera::bench
