// Case "conv-kernel": the local convolution kernels, one rank. Conv2d 32->32 3x3 on
// 1x32xHxW (--hw=512) and Conv3d 16->16 3x3x3 on 1x16xD^3 (--d=64), padding 1, float32
// (--dtype=f64 for the float64 path): forward, backward-data and backward-weights (with
// bias grad) on host memory (oneDNN) and, where a device exists, on device memory
// (cuDNN). The host forward is also timed as a bare oneDNN primitive execute on the same
// buffers (built like the library's, weights pre-reordered), interleaved with the library's call,
// so the row shows what the library's call adds: cache look-up, memory wrappers, weight reorder,
// locking. Every pass's result is checked (untimed) at sampled cells against a direct
// float64 sum (device results against the host's, in full).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cmath>
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
// reordered once at construction; where the library runs the pass channels-last, the same
// layout with the same reorders of x and y around the execute.
class BareForward {
 public:
  BareForward(const ConvDesc& c, Buffers& b, bool channels_last)
      : eng_(dnnl::engine::kind::cpu, 0), s_(eng_) {
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
    const auto last = c.nd == 1   ? memory::format_tag::nwc
                      : c.nd == 2 ? memory::format_tag::nhwc
                                  : memory::format_tag::ndhwc;
    const auto act = channels_last ? last : plain;
    const memory::desc xmd(x, f32, act), ymd(y, f32, act),
        bmd({c.c_out}, f32, memory::format_tag::x), wmd(w, f32, wplain),
        wany(w, f32, memory::format_tag::any);
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct, xmd, wany, bmd, ymd,
                                        st, dl, pl, pr),
        eng_);
    memory wu(wmd, eng_, b.w.data());
    if (channels_last) {
      x_user_ = memory(memory::desc(x, f32, plain), eng_, b.x.data());
      y_user_ = memory(memory::desc(y, f32, plain), eng_, b.y.data());
      args_ = {{DNNL_ARG_SRC, memory(xmd, eng_)},
               {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), eng_)},
               {DNNL_ARG_BIAS, memory(bmd, eng_, b.b.data())},
               {DNNL_ARG_DST, memory(ymd, eng_)}};
      x_in_ = dnnl::reorder(x_user_, args_[DNNL_ARG_SRC]);
      y_out_ = dnnl::reorder(args_[DNNL_ARG_DST], y_user_);
    } else {
      args_ = {{DNNL_ARG_SRC, memory(xmd, eng_, b.x.data())},
               {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), eng_)},
               {DNNL_ARG_BIAS, memory(bmd, eng_, b.b.data())},
               {DNNL_ARG_DST, memory(ymd, eng_, b.y.data())}};
    }
    channels_last_ = channels_last;
    dnnl::reorder(wu, args_[DNNL_ARG_WEIGHTS]).execute(s_, wu, args_[DNNL_ARG_WEIGHTS]);
    prim_ = dnnl::convolution_forward(pd);
  }
  void operator()() {
    if (channels_last_) x_in_.execute(s_, x_user_, args_[DNNL_ARG_SRC]);
    prim_.execute(s_, args_);
    if (channels_last_) y_out_.execute(s_, args_[DNNL_ARG_DST], y_user_);
    s_.wait();
  }

 private:
  dnnl::engine eng_;
  dnnl::stream s_;
  std::unordered_map<int, dnnl::memory> args_;
  dnnl::convolution_forward prim_;
  bool channels_last_ = false;
  dnnl::memory x_user_, y_user_;
  dnnl::reorder x_in_, y_out_;
};

// Element i of a buffer of float32 or float64 values, as a double.
double element(DType t, const std::vector<char>& v, Index i) {
  return t == DType::f32 ? reinterpret_cast<const float*>(v.data())[i]
                         : reinterpret_cast<const double*>(v.data())[i];
}

// Direct float64 sums of the three passes at sampled cells: one sample, groups 1 (the
// problems here). Spatial dims are padded to three at the front (extent 1).
class DirectConv {
 public:
  explicit DirectConv(const ConvDesc& c) : c_(c) {
    for (int d = 0; d < 3; ++d) {
      const int s = d - (3 - c.nd);  // the desc's dim, < 0: a padded one
      in_[d] = s < 0 ? 1 : c.in[s], out_[d] = s < 0 ? 1 : c.out(s);
      k_[d] = s < 0 ? 1 : c.kernel[s], st_[d] = s < 0 ? 1 : c.stride[s];
      dl_[d] = s < 0 ? 1 : c.dilation[s], pad_[d] = s < 0 ? 0 : c.pad_lo[s];
    }
  }
  Index in_cells() const { return in_[0] * in_[1] * in_[2]; }
  Index out_cells() const { return out_[0] * out_[1] * out_[2]; }
  Index taps() const { return k_[0] * k_[1] * k_[2]; }
  // y[o, p]
  double forward(const Buffers& b, Index o, Index p) const {
    double sum = at(b.b, o);
    for (Index i = 0; i < c_.c_in; ++i)
      for (Index k = 0; k < taps(); ++k) {
        const Index q = input_of(p, k);
        if (q >= 0) sum += at(b.w, (o * c_.c_in + i) * taps() + k) * at(b.x, i * in_cells() + q);
      }
    return sum;
  }
  // dx[i, q] from dy = b.y: the output cells whose tap k reads q
  double backward_data(const Buffers& b, Index i, Index q) const {
    const Index qc[3] = {q / (in_[1] * in_[2]), (q / in_[2]) % in_[1], q % in_[2]};
    double sum = 0;
    for (Index k = 0; k < taps(); ++k) {
      const Index kc[3] = {k / (k_[1] * k_[2]), (k / k_[2]) % k_[1], k % k_[2]};
      Index p = 0;
      for (int d = 0; d < 3 && p >= 0; ++d) {
        const Index num = qc[d] + pad_[d] - kc[d] * dl_[d];
        p = num < 0 || num % st_[d] != 0 || num / st_[d] >= out_[d] ? -1
                                                                    : p * out_[d] + num / st_[d];
      }
      if (p < 0) continue;
      for (Index o = 0; o < c_.c_out; ++o)
        sum += at(b.w, (o * c_.c_in + i) * taps() + k) * at(b.y, o * out_cells() + p);
    }
    return sum;
  }
  // dw[o, i, k] from dy = b.y
  double backward_weights(const Buffers& b, Index o, Index i, Index k) const {
    double sum = 0;
    for (Index p = 0; p < out_cells(); ++p) {
      const Index q = input_of(p, k);
      if (q >= 0) sum += at(b.y, o * out_cells() + p) * at(b.x, i * in_cells() + q);
    }
    return sum;
  }
  double at(const std::vector<char>& v, Index i) const { return element(c_.type, v, i); }

 private:
  // The input cell tap k of output cell p reads, -1 in the padding.
  Index input_of(Index p, Index k) const {
    Index q = 0;
    Index pc[3] = {p / (out_[1] * out_[2]), (p / out_[2]) % out_[1], p % out_[2]};
    Index kc[3] = {k / (k_[1] * k_[2]), (k / k_[2]) % k_[1], k % k_[2]};
    for (int d = 0; d < 3; ++d) {
      const Index x = pc[d] * st_[d] - pad_[d] + kc[d] * dl_[d];
      if (x < 0 || x >= in_[d]) return -1;
      q = q * in_[d] + x;
    }
    return q;
  }
  ConvDesc c_;
  Index in_[3], out_[3], k_[3], st_[3], dl_[3], pad_[3];
};

// The largest error of each pass at 48 sampled cells (every bias gradient), relative to
// the largest reference value of the pass.
std::array<double, 3> sampled_errors(const ConvDesc& c, const Buffers& b) {
  const DirectConv ref(c);
  std::mt19937 g(11);
  auto pick = [&](Index n) { return std::uniform_int_distribution<Index>(0, n - 1)(g); };
  std::array<double, 3> err{}, scale{};
  auto note = [&](int pass, double got, double want) {
    err[pass] = std::max(err[pass], std::abs(got - want));
    scale[pass] = std::max(scale[pass], std::abs(want));
  };
  for (int s = 0; s < 48; ++s) {
    const Index o = pick(c.c_out), i = pick(c.c_in), p = pick(ref.out_cells()),
                q = pick(ref.in_cells()), k = pick(ref.taps());
    note(0, ref.at(b.y, o * ref.out_cells() + p), ref.forward(b, o, p));
    note(1, ref.at(b.dx, i * ref.in_cells() + q), ref.backward_data(b, i, q));
    note(2, ref.at(b.dw, (o * c.c_in + i) * ref.taps() + k), ref.backward_weights(b, o, i, k));
  }
  for (Index o = 0; o < c.c_out; ++o) {
    double sum = 0;
    for (Index p = 0; p < ref.out_cells(); ++p) sum += ref.at(b.y, o * ref.out_cells() + p);
    note(2, ref.at(b.db, o), sum);
  }
  for (int p = 0; p < 3; ++p) err[p] /= std::max(scale[p], 1e-300);
  return err;
}

// The largest difference between a device result and the host's, relative to the host's
// largest value.
double device_vs_host(const ConvDesc& c, const void* dev, const std::vector<char>& host) {
  std::vector<char> back(host.size());
  device::copy(back.data(), dev, back.size(), device::Copy::DeviceToHost);
  double err = 0, scale = 0;
  const Index n = static_cast<Index>(host.size() / size_of(c.type));
  for (Index i = 0; i < n; ++i) {
    err = std::max(err, std::abs(element(c.type, back, i) - element(c.type, host, i)));
    scale = std::max(scale, std::abs(element(c.type, host, i)));
  }
  return err / std::max(scale, 1e-300);
}

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
                                (i.stages_x ? " +x staging" : "") +
                                (i.channels_last ? " +channels-last copies" : "");
      for (auto& s : impl) s += extra;
    }
    // Forward: the library's call and, in float32, the bare oneDNN execute, interleaved.
    auto fwd = [&] {
      kernels::conv_forward(Device::host(), c, b.x.data(), b.w.data(), b.b.data(), b.y.data());
    };
    Timing tf;
    Paired pf{};
    if (type == DType::f32) {
      BareForward bare(c, b, kernels::dnnl_conv::info(c).channels_last_forward);
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
    // The library's results once more (the bare forward wrote y last), then checked.
    fwd();
    kernels::conv_backward_data(Device::host(), c, b.y.data(), b.w.data(), b.dx.data());
    kernels::conv_backward_weights(Device::host(), c, b.x.data(), b.y.data(), b.dw.data(),
                                   b.db.data());
    const std::array<double, 3> err = sampled_errors(c, b);
    // float32 sums of up to 16 x 27 x 64^3 terms: 1e-4 of the largest value; float64 1e-11.
    const double tol = type == DType::f32 ? 1e-4 : 1e-11;
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
                {"GFLOPs", gflop / t[p]->median_s},
                {"max_error", err[p]},
                {"correct", err[p] <= tol}};
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
    // Each device pass once more from the host's inputs, against the host's result.
    device::copy(y, b.y.data(), b.y.size(), device::Copy::HostToDevice);
    kernels::conv_backward_data(dev, c, y, w, dx);
    kernels::conv_backward_weights(dev, c, x, y, dw, db);
    device::synchronize(dev);
    const double gerr[3] = {0, device_vs_host(c, dx, b.dx),
                            std::max(device_vs_host(c, dw, b.dw), device_vs_host(c, db, b.db))};
    kernels::conv_forward(dev, c, x, w, bias, y);
    device::synchronize(dev);
    const double gerr0 = device_vs_host(c, y, b.y);
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
                      {"GFLOPs", gflop / g[p]->median_s},
                      {"max_error", p == 0 ? gerr0 : gerr[p]},
                      {"correct", (p == 0 ? gerr0 : gerr[p]) <= tol}});
  }
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  bool correct = true;
  for (const auto& r : rows) correct = correct && r.at("correct").get<bool>();
  g.push_back(goal("every result checked correct", correct ? 1 : 0, "==", 1));
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
           "overhead_pct", "min_ms", "bare_min_ms", "overhead_min_pct", "max_error", "correct"},
          run,
          goals};
}

}  // namespace tessera::bench
