// Case "attention": the local attention kernel and the sequence-sharded algorithms.
//  (a) local attention forward + backward, --heads x --dim, sequence lengths --seq, float32,
//      achieved GFLOP/s (4 S^2 D per head forward, 2.5x that backward) against the machine's
//      matmul GFLOP/s measured in the same run (a --gemm^3 SGEMM through oneDNN, repeated to
//      span about the attention's time and timed in turn with its forward and backward in
//      every repetition);
//  (b) ring attention forward + backward at --ring_seq over the ranks: time and the
//      transfer time not hidden (waits), for E = T(1 rank, 1 thread) / (min(N, cores) x
//      T(N ranks, 1 thread each));
//  (c) ring vs all-to-all vs all-gather on the same problem and ranks.
// Every row's result is checked untimed (max_error, correct): the local kernel on sampled
// query and key rows against float64 sums, the device paths against the host kernel, the
// sharded algorithms' output and gradients against the host kernel on the whole sequence,
// and neighbourhood attention's output and gradients against the layer on one rank.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <iostream>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "apps/bench/cases.hpp"
#include "apps/bench/result_check.hpp"
#include "apps/bench/timing.hpp"
#include "kernels/attention.hpp"
#include "kernels/device/device.hpp"
#include "runtime/attention/neighborhood_attention.hpp"
#include "runtime/attention/sequence_attention.hpp"
#include "runtime/attention/zigzag_ring.hpp"
#include "runtime/comm/comm_timers.hpp"
#include "runtime/comm/grad_sync.hpp"

namespace tessera::bench {
namespace {

// An n^3 float32 matmul through oneDNN: the machine's matmul speed, timed call by call so it
// can be interleaved with the kernel it is compared with (both then see the same load).
class Sgemm {
 public:
  explicit Sgemm(Index n)
      : n_(n),
        eng_(dnnl::engine::kind::cpu, 0),
        s_(eng_),
        md_({n, n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab),
        a_(md_, eng_),
        b_(md_, eng_),
        c_(md_, eng_),
        mm_(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md_, md_, md_), eng_)) {
    for (Index i = 0; i < n * n; ++i) {
      static_cast<float*>(a_.get_data_handle())[i] = static_cast<float>(std::sin(0.001 * i));
      static_cast<float*>(b_.get_data_handle())[i] = static_cast<float>(std::cos(0.001 * i));
    }
  }
  void run() {
    mm_.execute(s_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}});
    s_.wait();
  }
  double gflops(double seconds) const { return 2.0 * n_ * n_ * n_ / seconds / 1e9; }

 private:
  Index n_;
  dnnl::engine eng_;
  dnnl::stream s_;
  dnnl::memory::desc md_;
  dnnl::memory a_, b_, c_;
  dnnl::matmul mm_;
};

// The same problem on the device by one path (cuBLAS GEMMs and row passes, or the fused
// kernels; each timed call waits for its work), in float32 or bfloat16 (the inputs rounded to
// nearest even).
json device_row(kernels::AttentionDesc a, DType t, kernels::CudaAttentionPath path,
                const std::vector<float>& q, const std::vector<float>& k,
                const std::vector<float>& v, const std::vector<float>& g, int threads) {
  a.type = t;
  const kernels::CudaAttentionPath before = kernels::cuda_attention_path();
  kernels::set_cuda_attention_path(path);
  const std::size_t es = size_of(t), bytes = q.size() * es;
  auto up = [&](const std::vector<float>& h) {
    std::vector<bf16_t> b;
    const void* src = h.data();
    if (t == DType::bf16) {
      for (float x : h) b.push_back(bf16_from_float(x));
      src = b.data();
    }
    void* p = device::alloc(bytes);
    device::copy(p, src, bytes, device::Copy::HostToDevice);
    return p;
  };
  void *dq_in = up(q), *dk_in = up(k), *dv_in = up(v), *dg = up(g), *out = device::alloc(bytes),
       *dq = device::alloc(bytes), *dk = device::alloc(bytes), *dv = device::alloc(bytes);
  auto* lse = static_cast<double*>(device::alloc(static_cast<std::size_t>(a.batch * a.sq) * 8));
  const Device dev = Device::cuda();
  const Timing tf = time_collective(MPI_COMM_SELF, 3, 1, [&] {
    kernels::attention_forward(dev, a, dq_in, dk_in, dv_in, out, lse);
    device::synchronize(dev);
  });
  const Timing tb = time_collective(MPI_COMM_SELF, 3, 1, [&] {
    kernels::attention_backward(dev, a, dq_in, dk_in, dv_in, out, dg, lse, dq, dk, dv);
    device::synchronize(dev);
  });
  // Untimed: the last calls' results, on sampled rows, against float64 sums of the inputs the
  // device was given (bfloat16: rounded); bfloat16 results are stored rounded to 8 bits of
  // mantissa, so their bound is that rounding's (2^-9 of each term), not float32's.
  auto down = [&](const void* p) {
    std::vector<float> h(q.size());
    if (t == DType::bf16) {
      std::vector<bf16_t> b(q.size());
      device::copy(b.data(), p, bytes, device::Copy::DeviceToHost);
      for (std::size_t i = 0; i < b.size(); ++i) h[i] = float_from_bf16(b[i]);
    } else {
      device::copy(h.data(), p, bytes, device::Copy::DeviceToHost);
    }
    return h;
  };
  auto as_given = [&](const std::vector<float>& h) {
    std::vector<float> r = h;
    if (t == DType::bf16)
      for (float& x : r) x = float_from_bf16(bf16_from_float(x));
    return r;
  };
  std::vector<double> lse_h(static_cast<std::size_t>(a.batch * a.sq));
  device::copy(lse_h.data(), lse, lse_h.size() * sizeof(double), device::Copy::DeviceToHost);
  kernels::AttentionDesc a32 = a;
  a32.type = DType::f32;
  const double err = sampled_attention_error(
      a32, as_given(q).data(), as_given(k).data(), as_given(v).data(), down(out).data(),
      lse_h.data(), as_given(g).data(), down(dq).data(), down(dk).data(), down(dv).data(), 16);
  for (void* p : {dq_in, dk_in, dv_in, dg, out, dq, dk, dv, static_cast<void*>(lse)})
    device::free(p);
  kernels::set_cuda_attention_path(before);
  const double flops_f = 4.0 * static_cast<double>(a.sq) * a.sk * a.d * a.batch;
  const char* how = path == kernels::CudaAttentionPath::Fused ? "fused" : "gemm";
  return {{"what", std::string("local fwd+bwd (device ") + how + ", " + name_of(t) + ")"},
          {"S", a.sq},
          {"ranks", 1},
          {"threads", threads},
          {"t_s", tf.median_s + tb.median_s},
          {"t_fwd_s", tf.median_s},
          {"GFLOPs", 3.5 * flops_f / (tf.median_s + tb.median_s) / 1e9},
          {"max_error", err},
          {"correct", err <= (t == DType::bf16 ? 1e-2 : 1e-4)}};
}

json local_rows(const cli::Args& opt, int threads) {
  json rows = json::array();
  const Index heads = opt.integer_in("heads", 1, 1 << 20), d = opt.integer_in("dim", 1, 1 << 20);
  Sgemm sgemm(opt.integer_in("gemm", 1, 1 << 20));
  for (double sd : opt.numbers("seq")) {
    const Index S = static_cast<Index>(sd);
    TESSERA_CHECK(S >= 1 && static_cast<double>(S) == sd,
                  "attention: --seq takes whole lengths of at least 1, not " << sd);
    kernels::AttentionDesc a;
    a.batch = heads;
    a.sq = a.sk = S;
    a.d = d;
    a.type = DType::f32;
    std::vector<float> q(static_cast<std::size_t>(heads * S * d)), k(q.size()), v(q.size()),
        out(q.size()), g(q.size()), dq(q.size()), dk(q.size()), dv(q.size());
    // Hashed values (sines of the index summed coherently to near zero, so the check could
    // not tell a zero result from the answer); v and g with a mean, so out and dv do not
    // cancel either.
    for (std::size_t i = 0; i < q.size(); ++i) {
      q[i] = hashed_value(i, 1);
      k[i] = hashed_value(i, 2);
      v[i] = 0.5f + 0.5f * hashed_value(i, 3);
      g[i] = 1e-3f * (0.5f + 0.5f * hashed_value(i, 4));
    }
    std::vector<double> lse(static_cast<std::size_t>(heads * S));
    const auto fwd = [&] {
      kernels::attention_forward(Device::host(), a, q.data(), k.data(), v.data(), out.data(),
                                 lse.data());
    };
    const auto bwd = [&] {
      kernels::attention_backward(Device::host(), a, q.data(), k.data(), v.data(), out.data(),
                                  g.data(), lse.data(), dq.data(), dk.data(), dv.data());
    };
    // One untimed round first (oneDNN's kernels generated, buffers touched), which also sizes
    // the baseline: the SGEMM repeated to span about as long as forward + backward, so both
    // sides of the ratio see the machine over alike stretches (a 0.08 s product against an
    // 11 s attention samples a shared host's load very differently). Then the medians of
    // forward, backward and the baseline, timed in turn in every repetition.
    const double t_att = time_slowest(MPI_COMM_SELF, fwd) + time_slowest(MPI_COMM_SELF, bwd);
    const double t_one = time_slowest(MPI_COMM_SELF, [&] { sgemm.run(); });
    const int gemm_reps = static_cast<int>(std::clamp(std::round(t_att / t_one), 1.0, 1000.0));
    const int reps = reps_option(opt, "local_reps");
    const std::vector<Timing> t =
        time_interleaved(MPI_COMM_SELF, reps, 0, {fwd, bwd, [&] {
                                                    for (int i = 0; i < gemm_reps; ++i) sgemm.run();
                                                  }});
    const Timing &tf = t[0], &tb = t[1];
    const double gemm = sgemm.gflops(t[2].median_s / gemm_reps);
    const double flops_f = 4.0 * static_cast<double>(S) * S * d * heads;
    const double gf = (flops_f + 2.5 * flops_f) / (tf.median_s + tb.median_s) / 1e9;
    // Untimed: the last repetition's results (forward then backward) on 16 query and 16 key
    // rows per head against float64 sums.
    const double err =
        sampled_attention_error(a, q.data(), k.data(), v.data(), out.data(), lse.data(), g.data(),
                                dq.data(), dk.data(), dv.data(), 16);
    rows.push_back({{"what", "local fwd+bwd"},
                    {"S", S},
                    {"ranks", 1},
                    {"threads", threads},
                    {"t_s", tf.median_s + tb.median_s},
                    {"t_fwd_s", tf.median_s},
                    {"GFLOPs", gf},
                    {"gemm_GFLOPs", gemm},
                    {"of_gemm", gf / gemm},
                    {"max_error", err},
                    {"correct", err <= 1e-5}});
    if (device::count() > 0)
      for (auto path : {kernels::CudaAttentionPath::Gemm, kernels::CudaAttentionPath::Fused})
        for (DType t : {DType::f32, DType::bf16})
          rows.push_back(device_row(a, t, path, q, k, v, g, threads));
  }
  return rows;
}

// The whole-sequence answer the sharded rows must give, on mesh rank 0: the host kernel on
// (x, x, x), its output and the gradients for dout = that output, causal or not (each
// computed the first time it is asked for).
class WholeSequence {
 public:
  struct Result {
    Tensor out, dq, dk, dv;
  };
  explicit WholeSequence(const ShardTensor& x) : x_(x.gather(0)) {}
  const Result& get(bool causal) {
    Result& r = results_[causal];
    if (r.out.defined()) return r;
    kernels::AttentionDesc a;
    a.batch = x_.shape()[0];
    a.sq = a.sk = x_.shape()[1];
    a.d = x_.shape()[2];
    a.causal = causal;
    a.type = DType::f32;
    for (Tensor* t : {&r.out, &r.dq, &r.dk, &r.dv}) *t = Tensor::empty(x_.shape(), DType::f32);
    std::vector<double> lse(static_cast<std::size_t>(a.batch * a.sq));
    const void* x = x_.data<float>();
    kernels::attention_forward(Device::host(), a, x, x, x, r.out.data<float>(), lse.data());
    kernels::attention_backward(Device::host(), a, x, x, x, r.out.data<float>(),
                                r.out.data<float>(), lse.data(), r.dq.data<float>(),
                                r.dk.data<float>(), r.dv.data<float>());
    return r;
  }

 private:
  Tensor x_;
  std::map<bool, Result> results_;
};

// One untimed forward and backward of a sharded algorithm on x against the whole sequence:
// the output, then the gradients for dout = the whole answer's output (scattered as the
// output is laid out). The largest relative error, on every rank.
double sharded_error(
    const ShardTensor& x, WholeSequence& whole, bool causal,
    const std::function<ShardTensor()>& forward,
    const std::function<std::array<ShardTensor, 3>(const ShardTensor&)>& backward) {
  const Mesh& mesh = x.mesh();
  const bool root = mesh.rank() == 0;
  const ShardTensor y = forward();
  const Tensor y_all = y.gather(0);
  const WholeSequence::Result* want = root ? &whole.get(causal) : nullptr;
  sleeping_barrier(mesh.comm());  // the others sleep while rank 0 computes the answer
  const ShardTensor dout = ShardTensor::scatter(mesh, root ? want->out : Tensor(), y.spec());
  const std::array<ShardTensor, 3> grads = backward(dout);
  double err = 0;
  const Tensor dq = grads[0].gather(0), dk = grads[1].gather(0), dv = grads[2].gather(0);
  if (root)
    err = std::max({rel_max_diff(y_all, want->out), rel_max_diff(dq, want->dq),
                    rel_max_diff(dk, want->dk), rel_max_diff(dv, want->dv)});
  TESSERA_MPI(MPI_Bcast(&err, 1, MPI_DOUBLE, 0, mesh.comm()));
  return err;
}

json sharded_rows(Context& ctx, const cli::Args& opt, int threads) {
  json rows = json::array();
  const Mesh mesh = Mesh::line(ctx.world(), "seq");
  const Index heads = opt.integer_in("heads", 1, 1 << 20), d = opt.integer_in("dim", 1, 1 << 20);
  const Index S = size_option(opt, "ring_seq");
  const std::vector<Index> shape{heads, S, d};
  const ShardSpec spec(shape, {Replicate(), Shard(0), Replicate()}, mesh);
  // Values of the global index: every rank's block differs, so a K/V block routed wrong
  // changes the answer (with values of the local index an even split gave every rank the
  // same block, and a ring that never moved one gave the right output).
  const ShardTensor t = ShardTensor::unchecked(mesh, spec, hashed_block(spec, mesh.coords(), 5));
  WholeSequence whole(t);
  const auto algos =
      opt.choices("algos", {"ring", "all_to_all", "all_gather", "ring_causal", "zigzag"});
  const auto wanted = [&](const std::string& n) { return algos.count(n) > 0; };
  for (auto algo :
       {SequenceAlgorithm::Ring, SequenceAlgorithm::AllToAll, SequenceAlgorithm::AllGather}) {
    if (!wanted(name_of(algo))) continue;
    SequenceAttention att({}, algo);
    const SplitTiming st = time_collective_split(
        ctx.world(), reps_option(opt), 1,
        [&] {
          const ShardTensor y = att.forward(t, t, t);
          att.backward(y);
        },
        [] { return comm_times().alltoall_s; });
    const Timing& tm = st.total;
    const double err = sharded_error(
        t, whole, false, [&] { return att.forward(t, t, t); },
        [&](const ShardTensor& dout) { return att.backward(dout); });
    rows.push_back({{"what", name_of(algo) + " fwd+bwd"},
                    {"S", S},
                    {"ranks", mesh.size()},
                    {"threads", threads},
                    {"cores", std::max(1, omp_get_num_procs())},
                    {"t_s", tm.median_s},
                    {"t_comm_wait_s", st.part_s},
                    {"max_error", err},
                    {"correct", err <= 1e-4}});
  }
  // Causal: the plain ring (rank r works on r + 1 blocks) against the zig-zag layout.
  for (bool zigzag : {false, true}) {
    if (!wanted(zigzag ? "zigzag" : "ring_causal")) continue;
    RingAttentionOptions o;
    o.causal = true;
    RingAttention ring(o);
    ZigZagRingAttention zz(o);
    const SplitTiming st = time_collective_split(
        ctx.world(), reps_option(opt), 1,
        [&] {
          if (zigzag) {
            const ShardTensor y = zz.forward(t, t, t);
            zz.backward(y);
          } else {
            const ShardTensor y = ring.forward(t, t, t);
            ring.backward(y);
          }
        },
        [] { return comm_times().alltoall_s; });
    const Timing& tm = st.total;
    const double err = sharded_error(
        t, whole, true, [&] { return zigzag ? zz.forward(t, t, t) : ring.forward(t, t, t); },
        [&](const ShardTensor& dout) { return zigzag ? zz.backward(dout) : ring.backward(dout); });
    rows.push_back({{"what", zigzag ? "zigzag causal fwd+bwd" : "ring causal fwd+bwd"},
                    {"S", S},
                    {"ranks", mesh.size()},
                    {"threads", threads},
                    {"cores", std::max(1, omp_get_num_procs())},
                    {"t_s", tm.median_s},
                    {"t_comm_wait_s", st.part_s},
                    {"max_error", err},
                    {"correct", err <= 1e-4}});
  }
  return rows;
}

// (d) Neighbourhood attention forward + backward on a --na_grid^2 token grid (--na_channels
// in 2 heads, --na_kernel keys per dim), rows split over the ranks: for E at 2 ranks.
json neighbourhood_rows(Context& ctx, const cli::Args& opt, int threads) {
  const Mesh mesh = Mesh::line(ctx.world(), "x");
  const Index n = size_option(opt, "na_grid"), c = size_option(opt, "na_channels");
  NeighborhoodAttentionOptions o;
  o.nd = 2;
  o.channels = c;
  o.heads = 2;
  o.kernel = {size_option(opt, "na_kernel")};
  NeighborhoodAttention na(o);
  const std::vector<Index> shape{1, c, n, n};
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  // Values of the global index, as above: a halo filled from the wrong block shows.
  const ShardTensor t = ShardTensor::unchecked(mesh, spec, hashed_block(spec, mesh.coords(), 6));
  const Timing tm = time_collective(ctx.world(), reps_option(opt), 1, [&] {
    const ShardTensor y = na.forward(t);
    na.backward(y);
  });
  // Untimed: the output, the input's gradient and the parameters' (summed over the ranks)
  // against the same layer on one rank over the whole grid, for dout = that layer's output.
  const bool root = mesh.rank() == 0;
  const Tensor x_all = t.gather(0);
  const ShardTensor y = na.forward(t);
  const Tensor y_all = y.gather(0);
  NeighborhoodAttention whole(o);
  Tensor y_want, dx_want;
  if (root) {
    const Mesh self(MPI_COMM_SELF, {1}, {"self"});
    y_want = whole.forward(ShardTensor(self, ShardSpec::replicated(shape, self), x_all)).local();
    dx_want = whole.backward(ShardTensor(self, ShardSpec::replicated(shape, self), y_want)).local();
  }
  sleeping_barrier(mesh.comm());  // the others sleep while rank 0 computes the answer
  for (Parameter* p : na.parameters()) p->grad.zero();
  const Tensor dx_all = na.backward(ShardTensor::scatter(mesh, y_want, y.spec())).gather(0);
  sync_grads(mesh, na.parameters());
  double err = 0;
  if (root) {
    err = std::max(rel_max_diff(y_all, y_want), rel_max_diff(dx_all, dx_want));
    const auto got = na.parameters(), want = whole.parameters();
    for (std::size_t i = 0; i < got.size(); ++i)
      err = std::max(err, rel_max_diff(got[i]->grad, want[i]->grad));
  }
  TESSERA_MPI(MPI_Bcast(&err, 1, MPI_DOUBLE, 0, mesh.comm()));
  json rows = json::array();
  rows.push_back({{"what", "neighbourhood fwd+bwd"},
                  {"S", n * n},
                  {"ranks", mesh.size()},
                  {"threads", threads},
                  {"cores", std::max(1, omp_get_num_procs())},
                  {"t_s", tm.median_s},
                  {"max_error", err},
                  {"correct", err <= 1e-4}});
  return rows;
}

json run(Context& ctx, const cli::Args& opt) {
  const int threads = threads_option(opt);
  omp_set_num_threads(threads);
  const auto which = opt.choices("which", {"local", "sharded", "neighbourhood"});
  json rows = json::array();
  if (which.count("local") && ctx.size() == 1)
    for (auto& r : local_rows(opt, threads)) rows.push_back(r);
  else if (which.count("local") && which.size() == 1 && ctx.rank() == 0)
    std::cerr << "attention: the local rows run at 1 rank (one rank's kernels); none at "
              << ctx.size() << " ranks" << std::endl;
  if (which.count("sharded"))
    for (auto& r : sharded_rows(ctx, opt, threads)) rows.push_back(r);
  if (which.count("neighbourhood"))
    for (auto& r : neighbourhood_rows(ctx, opt, threads)) rows.push_back(r);
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  bool correct = true;
  for (const auto& r : rows)
    correct = correct && r.contains("correct") && r.at("correct").get<bool>();
  g.push_back(goal("every result checked correct", correct ? 1 : 0, "==", 1));
  for (const auto& r : rows) {
    if (r.contains("of_gemm"))
      g.push_back(goal("local attention fwd+bwd S=" + std::to_string(int(r.at("S"))) +
                           ": GFLOP/s / SGEMM GFLOP/s",
                       r.at("of_gemm"), ">=", 0.8));
    if ((r.at("what") == "ring fwd+bwd" || r.at("what") == "neighbourhood fwd+bwd") &&
        int(r.at("ranks")) == 2 && int(r.at("threads")) == 1)
      for (const auto& one : rows)
        if (one.at("what") == r.at("what") && int(one.at("ranks")) == 1 &&
            int(one.at("threads")) == 1) {
          const int used = std::min(2, int(r.value("cores", 2)));
          g.push_back(goal(std::string(r.at("what")) + " S=" + std::to_string(int(r.at("S"))) +
                               ": E = T(1 rank) / (" + std::to_string(used) +
                               " x T(2 ranks)), 1 thread each",
                           double(one.at("t_s")) / (used * double(r.at("t_s"))), ">=", 0.9));
        }
  }
  return g;
}

}  // namespace

Case attention_case() {
  Case c;
  c.name = "attention";
  c.help = "local attention GFLOP/s vs SGEMM; ring, all-to-all and all-gather attention scaling";
  c.options = {
      {"seq", "S[,S...]", "local kernel sequence lengths", "4096"},
      {"heads", "H", "heads", "8"},
      {"dim", "D", "head dim", "64"},
      {"gemm", "N", "SGEMM size of the machine's matmul rate", "2048"},
      {"ring_seq", "S", "sequence length of the sharded rows", "4096"},
      {"which", "LIST", "rows: local, sharded, neighbourhood", "local,sharded"},
      {"algos", "LIST", "sharded rows: ring, all_to_all, all_gather, ring_causal, zigzag",
       "ring,all_to_all,all_gather,ring_causal,zigzag"},
      {"na_grid", "N", "neighbourhood rows: an N x N token grid", "512"},
      {"na_channels", "C", "neighbourhood rows: channels (2 heads)", "32"},
      {"na_kernel", "K", "neighbourhood rows: keys per dim", "7"},
      {"reps", "N", "timed repetitions (sharded rows)", "3"},
      {"local_reps", "N", "timed repetitions of the local kernel (after one untimed)", "3"},
      {"threads", "N", "OpenMP threads per rank", "1"}};
  c.rank_counts = {1, 2, 4};
  c.columns = {"what",   "S",           "ranks",   "threads",       "t_s",       "t_fwd_s",
               "GFLOPs", "gemm_GFLOPs", "of_gemm", "t_comm_wait_s", "max_error", "correct"};
  c.run = run;
  c.goals = goals;
  return c;
}

}  // namespace tessera::bench
