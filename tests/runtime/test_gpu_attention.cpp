// The CUDA attention paths (cuBLAS and fused) against the host: the local kernels (forward output
// and LSE, every gradient including the bias's, the LSE merge) over odd lengths, causal blocks with
// offsets, broadcast and per-problem biases with masked entries and rows that see no key,
// float64 and float32; and sequence-sharded attention (ring, all-to-all, all-gather) on
// CUDA tensors against the same on host tensors, uneven shards and causal included.
// Skips, saying so, where no device exists.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/neighborhood_attention.hpp"
#include "kernels/physics_attention.hpp"
#include "runtime/attention/neighborhood_attention.hpp"
#include "runtime/attention/physics_attention.hpp"
#include "runtime/attention/sequence_attention.hpp"
#include "runtime/tensor/tensor_math.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/bf16.hpp"
#include "tests/support/have_device.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/attention_cases.hpp"

using namespace tessera;

namespace {

Tensor rnd(const std::vector<Index>& shape, DType t, unsigned seed) {
  return test::random_tensor(shape, t, seed);
}

kernels::AttentionDesc desc(Index batch, Index sq, Index sk, Index d, bool causal, Index q0,
                            Index k0, DType t) {
  kernels::AttentionDesc a;
  a.batch = batch;
  a.sq = sq;
  a.sk = sk;
  a.d = d;
  a.causal = causal;
  a.q_offset = q0;
  a.k_offset = k0;
  a.type = t;
  return a;
}

struct KernelRun {
  Tensor out, lse, dq, dk, dv, db;
};

// Forward and backward of the local kernel with the tensors in `space`, results on the host.
KernelRun run_kernel(kernels::AttentionDesc a, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& dout, const Tensor* bias, MemSpace space) {
  const Tensor qs = q.to(space), ks = k.to(space), vs = v.to(space), gs = dout.to(space);
  Tensor bs;
  if (bias) {
    bs = bias->to(space);
    a.bias = bs.raw();
  }
  const Device dev = qs.device();
  KernelRun r;
  Tensor out = Tensor::empty(q.shape(), q.dtype(), space),
         lse = Tensor::empty({a.batch, a.sq}, DType::f64, space),
         dq = Tensor::empty(q.shape(), q.dtype(), space),
         dk = Tensor::empty(k.shape(), k.dtype(), space),
         dv = Tensor::empty(v.shape(), v.dtype(), space),
         db = Tensor::empty({a.batch, a.sq, a.sk}, q.dtype(), space);
  kernels::attention_forward(dev, a, qs.raw(), ks.raw(), vs.raw(), out.raw(), lse.data<double>());
  kernels::attention_backward(dev, a, qs.raw(), ks.raw(), vs.raw(), out.raw(), gs.raw(),
                              lse.data<double>(), dq.raw(), dk.raw(), dv.raw(),
                              bias ? db.raw() : nullptr);
  r.out = out.to(MemSpace::Host);
  r.lse = lse.to(MemSpace::Host);
  r.dq = dq.to(MemSpace::Host);
  r.dk = dk.to(MemSpace::Host);
  r.dv = dv.to(MemSpace::Host);
  if (bias) r.db = db.to(MemSpace::Host);
  return r;
}

// The neighbourhood attention kernels forward and backward with the tensors in `space`: q
// (N, C, cells), kv (N, 2C, cells), upstream g as q; out, dq and dkv on the host.
std::vector<Tensor> neighbourhood_run(const kernels::NeighborhoodDesc& d, const Tensor& q,
                                      const Tensor& kv, const Tensor& g, MemSpace space) {
  const Tensor qs = q.to(space), kvs = kv.to(space), gs = g.to(space);
  Tensor out = Tensor::empty(q.shape(), q.dtype(), space),
         lse = Tensor::empty({q.shape(0), d.heads, q.shape(2)}, DType::f64, space),
         dq = Tensor::empty(q.shape(), q.dtype(), space),
         dkv = Tensor::zeros(kv.shape(), kv.dtype(), space);
  const Device dev = qs.device();
  kernels::neighborhood_attention_forward(dev, d, qs.raw(), kvs.raw(), out.raw(),
                                          lse.data<double>());
  kernels::neighborhood_attention_backward(dev, d, qs.raw(), kvs.raw(), out.raw(), gs.raw(),
                                           lse.data<double>(), dq.raw(), dkv.raw());
  return {out.to(MemSpace::Host), dq.to(MemSpace::Host), dkv.to(MemSpace::Host)};
}

// Sets TESSERA_ATTENTION_CHUNK_BYTES for a scope ("" leaves the default).
struct ChunkBytes {
  explicit ChunkBytes(const char* v) {
    if (*v) setenv("TESSERA_ATTENTION_CHUNK_BYTES", v, 1);
  }
  ~ChunkBytes() { unsetenv("TESSERA_ATTENTION_CHUNK_BYTES"); }
};

// Largest difference of two LSE arrays, equal infinities (rows with no key) counting as 0.
double lse_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (Index i = 0; i < a.numel(); ++i) {
    const double x = a.data<double>()[i], y = b.data<double>()[i];
    if (x == y) continue;
    m = std::max(m, std::abs(x - y));
  }
  return m;
}

// Restores the CUDA attention path when a test leaves.
struct PathGuard {
  kernels::CudaAttentionPath before = kernels::cuda_attention_path();
  ~PathGuard() { kernels::set_cuda_attention_path(before); }
};

// The paths with the chunk sizes each is run at: the cuBLAS path at its default chunks and
// at chunks of a row or two (dK, dV summed over many); the fused kernels have no chunks.
struct PathRun {
  kernels::CudaAttentionPath path;
  const char* chunk;
};
constexpr PathRun kPathRuns[] = {{kernels::CudaAttentionPath::Gemm, ""},
                                 {kernels::CudaAttentionPath::Gemm, "3000"},
                                 {kernels::CudaAttentionPath::Fused, ""}};
const char* path_name(kernels::CudaAttentionPath p) {
  return p == kernels::CudaAttentionPath::Fused ? "fused" : "gemm";
}

}  // namespace

TEST_CASE("CUDA attention kernels equal the host kernels, forward and backward", "[gpu]") {
  if (!test::have_device()) return;
  const double inf = std::numeric_limits<double>::infinity();
  const PathGuard guard;
  for (const PathRun& run : kPathRuns)
    for (DType dt : {DType::f64, DType::f32}) {
      kernels::set_cuda_attention_path(run.path);
      const char* chunk = run.chunk;
      ChunkBytes scoped(chunk);
      const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
      struct Shape {
        Index batch, sq, sk, d;
        bool causal;
        Index q0, k0;
        int bias;  // 0 none, 1 broadcast, 2 per problem
      };
      // Head dims 5 to 130: each padded width of the fused kernels (32, 64, 128) and one
      // past them (the cuBLAS path takes it); several query and key tiles of 32, causal tiles
      // wholly hidden, a key tile no query sees, a query tile that sees no key (keys start 40
      // positions after the queries: rows 0-39 see nothing, the fused loops run zero times).
      for (const Shape& s :
           {Shape{3, 37, 53, 16, false, 0, 0, 0}, Shape{2, 29, 29, 8, true, 0, 0, 1},
            Shape{4, 17, 31, 64, true, 20, 5, 2}, Shape{1, 1, 7, 5, false, 0, 0, 2},
            Shape{2, 40, 33, 32, true, 0, 13, 0}, Shape{2, 70, 101, 100, true, 0, 30, 2},
            Shape{1, 65, 97, 130, false, 0, 0, 1}, Shape{3, 96, 64, 48, true, 0, 0, 0},
            Shape{2, 70, 40, 32, true, 0, 40, 0}}) {
        kernels::AttentionDesc a = desc(s.batch, s.sq, s.sk, s.d, s.causal, s.q0, s.k0, dt);
        const Tensor q = rnd({s.batch, s.sq, s.d}, dt, 1), k = rnd({s.batch, s.sk, s.d}, dt, 2),
                     v = rnd({s.batch, s.sk, s.d}, dt, 3), g = rnd({s.batch, s.sq, s.d}, dt, 4);
        Tensor bias;
        if (s.bias) {
          const Index nb = s.bias == 1 ? 1 : s.batch;
          bias = rnd({nb, s.sq, s.sk}, dt, 5);
          auto mask = [&](Index i) {
            if (dt == DType::f64)
              bias.data<double>()[i] = -inf;
            else
              bias.data<float>()[i] = -std::numeric_limits<float>::infinity();
          };
          for (Index i = 0; i < bias.numel(); i += 3) mask(i);
          if (s.sq > 1)  // a row that sees no key at all
            for (Index j = 0; j < s.sk; ++j) mask(s.sk + j);
          a.bias_batch_stride = s.bias == 1 ? 0 : s.sq * s.sk;
        }
        const Tensor* bp = s.bias ? &bias : nullptr;
        const KernelRun h = run_kernel(a, q, k, v, g, bp, MemSpace::Host),
                        d = run_kernel(a, q, k, v, g, bp, MemSpace::Cuda);
        INFO(path_name(run.path) << ", chunk bytes '" << chunk << "' " << name_of(dt) << " B "
                                 << s.batch << " sq " << s.sq << " sk " << s.sk << " d " << s.d
                                 << (s.causal ? " causal" : "") << " bias " << s.bias);
        MPI_CHECK(test::rel_error(d.out, h.out) < tol);
        MPI_CHECK(lse_diff(d.lse, h.lse) < tol);
        MPI_CHECK(test::rel_error(d.dq, h.dq) < tol);
        MPI_CHECK(test::rel_error(d.dk, h.dk) < tol);
        MPI_CHECK(test::rel_error(d.dv, h.dv) < tol);
        if (s.bias) MPI_CHECK(test::rel_error(d.db, h.db) < tol);
      }
    }
}

TEST_CASE("CUDA attention makes the rows and keys that see a NaN NaN, as the host", "[gpu]") {
  // A NaN query element and a NaN key element, causal (some rows do not see the key). The
  // output and LSE are NaN exactly where the host's are. The gradients are NaN at least for
  // every row and key that sees a NaN (the float64 host loop's set, the minimal one); the
  // entries of masked pairs may be NaN too, path by path (0 x NaN in the GEMMs); every entry
  // finite on both sides agrees.
  if (!test::have_device()) return;
  const PathGuard guard;
  auto nan_mask = [](const Tensor& t) {
    const Tensor d = converted(t, DType::f64);
    std::vector<int> m(static_cast<std::size_t>(d.numel()));
    for (Index i = 0; i < d.numel(); ++i)
      m[static_cast<std::size_t>(i)] = std::isnan(d.data<double>()[i]);
    return m;
  };
  auto covers = [](const std::vector<int>& m, const std::vector<int>& must) {
    for (std::size_t i = 0; i < m.size(); ++i)
      if (must[i] && !m[i]) return false;
    return true;
  };
  auto finite_diff = [](const Tensor& x, const Tensor& y) {  // over entries finite in both
    const Tensor a = converted(x, DType::f64), b = converted(y, DType::f64);
    double m = 0, scale = 0;
    for (Index i = 0; i < a.numel(); ++i) {
      const double u = a.data<double>()[i], w = b.data<double>()[i];
      if (std::isnan(u) || std::isnan(w)) continue;
      m = std::max(m, std::abs(u - w));
      scale = std::max(scale, std::abs(w));
    }
    return m / std::max(scale, 1e-300);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto poisoned = [&](std::vector<Index> shape, unsigned seed, Index at, DType dt) {
    Tensor t = converted(rnd(shape, DType::f64, seed), DType::f64).clone();
    t.data<double>()[at] = nan;
    return converted(t, dt);
  };
  const Index q_nan = (0 * 37 + 5) * 16 + 3, k_nan = (1 * 70 + 60) * 16 + 7;  // row 5, key 60
  auto inputs = [&](DType dt) {
    return std::array<Tensor, 4>{poisoned({2, 37, 16}, 1, q_nan, dt),
                                 poisoned({2, 70, 16}, 2, k_nan, dt),
                                 converted(rnd({2, 70, 16}, DType::f64, 3), dt),
                                 converted(rnd({2, 37, 16}, DType::f64, 4), dt)};
  };
  const auto in64 = inputs(DType::f64);
  const KernelRun minimal = run_kernel(desc(2, 37, 70, 16, true, 40, 0, DType::f64), in64[0],
                                       in64[1], in64[2], in64[3], nullptr, MemSpace::Host);
  MPI_CHECK(nan_mask(minimal.out)[(0 * 37 + 5) * 16] == 1);
  MPI_CHECK(nan_mask(minimal.out)[(1 * 37 + 19) * 16] == 0);  // row 19 sees keys <= 59
  MPI_CHECK(nan_mask(minimal.out)[(1 * 37 + 20) * 16] == 1);
  for (const PathRun& run : kPathRuns)
    for (DType dt : {DType::f64, DType::f32}) {
      kernels::set_cuda_attention_path(run.path);
      ChunkBytes scoped(run.chunk);
      const kernels::AttentionDesc a = desc(2, 37, 70, 16, true, 40, 0, dt);
      const auto in = inputs(dt);
      const KernelRun h = run_kernel(a, in[0], in[1], in[2], in[3], nullptr, MemSpace::Host),
                      d = run_kernel(a, in[0], in[1], in[2], in[3], nullptr, MemSpace::Cuda);
      INFO(path_name(run.path) << ", chunk bytes '" << run.chunk << "' " << name_of(dt));
      const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
      MPI_CHECK(nan_mask(d.out) == nan_mask(h.out));
      MPI_CHECK(nan_mask(d.lse) == nan_mask(h.lse));
      MPI_CHECK(finite_diff(d.out, h.out) < tol);
      for (const auto& [dev_t, host_t, must] :
           {std::tuple{&d.dq, &h.dq, &minimal.dq}, std::tuple{&d.dk, &h.dk, &minimal.dk},
            std::tuple{&d.dv, &h.dv, &minimal.dv}}) {
        MPI_CHECK(covers(nan_mask(*dev_t), nan_mask(*must)));
        MPI_CHECK(covers(nan_mask(*host_t), nan_mask(*must)));
        MPI_CHECK(finite_diff(*dev_t, *host_t) < tol);
      }
    }
}

TEST_CASE("CUDA bfloat16 attention equals float32 attention of the rounded inputs", "[gpu]") {
  if (!test::have_device()) return;
  struct Shape {
    Index batch, sq, sk, d;
    bool causal, bias;
  };
  const PathGuard guard;
  for (const PathRun& run : kPathRuns)
    // d = 100: the fused kernels' 128-wide instantiation, past 48 KiB of shared memory.
    for (const Shape& s :
         {Shape{4, 64, 96, 64, false, false}, Shape{2, 33, 47, 32, true, true},
          Shape{3, 300, 257, 16, true, false}, Shape{2, 33, 47, 100, true, false}}) {
      kernels::set_cuda_attention_path(run.path);
      const char* chunk = run.chunk;
      ChunkBytes scoped(chunk);
      kernels::AttentionDesc a =
          desc(s.batch, s.sq, s.sk, s.d, s.causal, 0, s.causal ? 3 : 0, DType::f32);
      const auto [qb, qf] = test::rounded_bf16(rnd({s.batch, s.sq, s.d}, DType::f32, 1));
      const auto [kb, kf] = test::rounded_bf16(rnd({s.batch, s.sk, s.d}, DType::f32, 2));
      const auto [vb, vf] = test::rounded_bf16(rnd({s.batch, s.sk, s.d}, DType::f32, 3));
      const auto [gb, gf] = test::rounded_bf16(rnd({s.batch, s.sq, s.d}, DType::f32, 4));
      Tensor biasb, biasf;
      if (s.bias) {
        Tensor raw = rnd({s.batch, s.sq, s.sk}, DType::f32, 5);
        for (Index i = 0; i < raw.numel(); i += 4)
          raw.data<float>()[i] = -std::numeric_limits<float>::infinity();
        std::tie(biasb, biasf) = test::rounded_bf16(raw);
        a.bias_batch_stride = s.sq * s.sk;
      }
      a.type = DType::f32;
      const KernelRun want =
          run_kernel(a, qf, kf, vf, gf, s.bias ? &biasf : nullptr, MemSpace::Host);
      a.type = DType::bf16;
      const KernelRun got =
          run_kernel(a, qb, kb, vb, gb, s.bias ? &biasb : nullptr, MemSpace::Cuda);
      INFO(path_name(run.path) << ", chunk bytes '" << chunk << "' bf16 B " << s.batch << " sq "
                               << s.sq << " sk " << s.sk << " d " << s.d
                               << (s.causal ? " causal" : "") << (s.bias ? " bias" : ""));
      // One bf16 rounding of each result (2^-8 relative) on float32 sums; P and dS pass
      // through bf16 between the GEMMs: a few roundings in all.
      const double tol = 2e-2;
      MPI_CHECK(test::rel_error(test::bf16_as_f32(got.out), want.out) < tol);
      MPI_CHECK(lse_diff(got.lse, want.lse) < 1e-3);
      MPI_CHECK(test::rel_error(test::bf16_as_f32(got.dq), want.dq) < tol);
      MPI_CHECK(test::rel_error(test::bf16_as_f32(got.dk), want.dk) < tol);
      MPI_CHECK(test::rel_error(test::bf16_as_f32(got.dv), want.dv) < tol);
      if (s.bias) MPI_CHECK(test::rel_error(test::bf16_as_f32(got.db), want.db) < tol);
    }
}

TEST_CASE("the fused CUDA attention gives the same bits every run (no atomics)", "[gpu]") {
  if (!test::have_device()) return;
  const PathGuard guard;
  kernels::set_cuda_attention_path(kernels::CudaAttentionPath::Fused);
  kernels::AttentionDesc a = desc(4, 200, 150, 64, true, 60, 0, DType::f32);
  const Tensor q = rnd({4, 200, 64}, DType::f32, 1), k = rnd({4, 150, 64}, DType::f32, 2),
               v = rnd({4, 150, 64}, DType::f32, 3), g = rnd({4, 200, 64}, DType::f32, 4);
  const KernelRun one = run_kernel(a, q, k, v, g, nullptr, MemSpace::Cuda),
                  two = run_kernel(a, q, k, v, g, nullptr, MemSpace::Cuda);
  for (auto member :
       {&KernelRun::out, &KernelRun::lse, &KernelRun::dq, &KernelRun::dk, &KernelRun::dv}) {
    const Tensor &x = one.*member, &y = two.*member;
    MPI_CHECK(std::memcmp(x.raw(), y.raw(), static_cast<std::size_t>(x.nbytes())) == 0);
  }
}

TEST_CASE("bfloat16 attention is refused on the host, clearly", "[gpu]") {
  kernels::AttentionDesc a;
  a.type = DType::bf16;
  a.sq = a.sk = a.d = 1;
  bf16_t x{0};
  double l = 0;
  CHECK_THROWS_WITH(kernels::attention_forward(Device::host(), a, &x, &x, &x, &x, &l),
                    Catch::Contains("bfloat16 runs on a CUDA device"));
}

TEST_CASE("CUDA LSE merge equals the host merge", "[gpu]") {
  if (!test::have_device()) return;
  for (DType dt : {DType::f64, DType::f32}) {
    const Index B = 3, S = 11, D = 6;
    const Tensor o1 = rnd({B, S, D}, dt, 6), o2 = rnd({B, S, D}, dt, 7);
    Tensor l1 = rnd({B, S}, DType::f64, 8), l2 = rnd({B, S}, DType::f64, 9);
    l1.data<double>()[2] = -std::numeric_limits<double>::infinity();  // a row with no key yet
    Tensor ho = o1.clone(), hl = l1.clone();
    kernels::attention_merge(Device::host(), dt, B, S, D, ho.raw(), hl.data<double>(), o2.raw(),
                             l2.data<double>());
    Tensor dout = o1.to(MemSpace::Cuda), dl = l1.to(MemSpace::Cuda);
    const Tensor d2 = o2.to(MemSpace::Cuda), dl2 = l2.to(MemSpace::Cuda);
    kernels::attention_merge(dout.device(), dt, B, S, D, dout.raw(), dl.data<double>(), d2.raw(),
                             dl2.data<double>());
    const double tol = dt == DType::f64 ? 1e-13 : 1e-6;
    MPI_CHECK(test::rel_error(dout.to(MemSpace::Host), ho) < tol);
    MPI_CHECK(lse_diff(dl.to(MemSpace::Host), hl) < tol);
  }
}

TEST_CASE("sequence-sharded attention on CUDA tensors equals the host path", "[gpu]") {
  if (!test::have_device()) return;
  const Mesh mesh = Mesh::line(test::harness_comm(), "seq");
  const PathGuard guard;
  std::mt19937 rng(5);
  for (auto path : {kernels::CudaAttentionPath::Gemm, kernels::CudaAttentionPath::Fused})
    for (bool uneven : {false, true})
      for (bool causal : {false, true})
        for (DType dt : {DType::f64, DType::f32})
          for (auto algo : {SequenceAlgorithm::Ring, SequenceAlgorithm::AllToAll,
                            SequenceAlgorithm::AllGather}) {
            const std::vector<Index> shape{4, 23, 8};
            std::vector<std::vector<Index>> sizes(3);
            if (uneven) sizes[1] = test::random_sizes(rng, shape[1], mesh.dim(0));
            const ShardSpec spec(shape, {Replicate(), Shard(0), Replicate()}, mesh, {}, sizes);
            const Tensor q = rnd(shape, dt, 1), k = rnd(shape, dt, 2), v = rnd(shape, dt, 3),
                         g = rnd(shape, dt, 4);
            RingAttentionOptions o;
            o.causal = causal;
            auto run = [&](MemSpace space) {
              SequenceAttention att(o, algo);
              const Tensor out = att.forward(ShardTensor::scatter(mesh, q.to(space), spec),
                                             ShardTensor::scatter(mesh, k.to(space), spec),
                                             ShardTensor::scatter(mesh, v.to(space), spec))
                                     .gather_all()
                                     .to(MemSpace::Host);
              const auto gr = att.backward(ShardTensor::scatter(mesh, g.to(space), spec));
              return std::vector<Tensor>{out, gr[0].gather_all().to(MemSpace::Host),
                                         gr[1].gather_all().to(MemSpace::Host),
                                         gr[2].gather_all().to(MemSpace::Host)};
            };
            kernels::set_cuda_attention_path(path);
            const auto h = run(MemSpace::Host), d = run(MemSpace::Cuda);
            const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
            INFO(path_name(path) << " " << spec.str() << (causal ? " causal " : " ") << name_of(dt)
                                 << " " << name_of(algo));
            for (int i = 0; i < 4; ++i) MPI_CHECK(test::rel_error(d[i], h[i]) < tol);
          }
}

TEST_CASE("CUDA neighbourhood attention covers more queries than a capped grid holds", "[gpu]") {
  // One thread per query and per frame cell: 9,000,001 cells are more than 65535 blocks of
  // 128 threads (8,388,480), so a grid capped there would leave the last queries undone.
  if (!test::have_device()) return;
  kernels::NeighborhoodDesc d;
  d.nd = 1;
  d.batch = 1;
  d.extent[0] = d.q_shape[0] = d.f_shape[0] = 9000001;
  d.kernel[0] = 3;
  d.type = DType::f32;
  const Index n = d.extent[0];
  const Tensor q = rnd({1, 1, n}, DType::f32, 1), kv = rnd({1, 2, n}, DType::f32, 2),
               g = rnd({1, 1, n}, DType::f32, 3);
  const auto h = neighbourhood_run(d, q, kv, g, MemSpace::Host),
             c = neighbourhood_run(d, q, kv, g, MemSpace::Cuda);
  for (std::size_t i = 0; i < h.size(); ++i) MPI_CHECK(test::rel_error(c[i], h[i]) < 2e-5);
}

// The physics attention kernels (slice, deslice and their adjoints) on one shape, with
// deterministic parameters and upstream sums: run() in a memory space, check() CUDA against host.
struct PhysicsKernelCase {
  kernels::PhysicsShape s;
  std::vector<double> ws, bs, tau, o, da, dz;
  Tensor x, dy;
  struct Result {
    std::vector<Tensor> points;  // w, y, dx
    std::vector<double> sums;    // acc, dO, dws, dbs, dtau
  };

  explicit PhysicsKernelCase(kernels::PhysicsShape shape) : s(shape) {
    const Index hd = s.heads * s.dim, tok = s.heads * s.slices * s.dim;
    auto wave = [](std::vector<double>& v, std::size_t n, double a, double b) {
      v.resize(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = 0.5 * std::sin(a * static_cast<double>(i) + b);
    };
    wave(ws, static_cast<std::size_t>(s.slices * s.dim), 0.9, 0.3);
    wave(bs, static_cast<std::size_t>(s.slices), 1.3, 0.2);
    wave(tau, static_cast<std::size_t>(s.heads), 0.5, 1.0);
    for (double& t : tau) t += 0.6;  // temperatures > 0
    wave(o, static_cast<std::size_t>(tok), 0.7, 0.1);
    wave(da, static_cast<std::size_t>(tok), 0.3, 1.5);
    wave(dz, static_cast<std::size_t>(s.heads * s.slices), 0.4, -0.2);
    x = rnd({s.batch, 2 * hd, s.points}, DType::f32, 5);
    dy = rnd({s.batch, hd, s.points}, DType::f32, 6);
  }

  Result run(MemSpace space) const {
    const Index n = s.points, hd = s.heads * s.dim, tok = s.heads * s.slices * s.dim;
    const kernels::SliceParams params{ws.data(), bs.data(), tau.data()};
    const Tensor xs = x.to(space), dys = dy.to(space);
    Tensor w = Tensor::empty({s.batch, s.heads, s.slices, n}, DType::f32, space),
           y = Tensor::empty({s.batch, hd, n}, DType::f32, space),
           dx = Tensor::empty({s.batch, 2 * hd, n}, DType::f32, space);
    std::vector<double> acc(s.batch * s.heads * s.slices * (s.dim + 1)), d_o(s.batch * tok),
        dws(ws.size(), 0.0), dbs(bs.size(), 0.0), dtau(tau.size(), 0.0);
    const Device dev = xs.device();
    kernels::physics_slice(dev, DType::f32, s, xs.raw(), params, w.raw(), acc.data());
    kernels::physics_deslice(dev, DType::f32, s, w.raw(), o.data(), y.raw());
    kernels::physics_deslice_grad(dev, DType::f32, s, w.raw(), dys.raw(), d_o.data());
    const kernels::SliceBackward b{.x = xs.raw(),
                                   .w = w.raw(),
                                   .dy = dys.raw(),
                                   .o = o.data(),
                                   .da = da.data(),
                                   .dz = dz.data(),
                                   .dx = dx.raw(),
                                   .dws = dws.data(),
                                   .dbs = dbs.data(),
                                   .dtau = dtau.data()};
    kernels::physics_slice_backward(dev, DType::f32, s, params, b);
    Result r;
    r.points = {w.to(MemSpace::Host), y.to(MemSpace::Host), dx.to(MemSpace::Host)};
    for (const auto* v : {&acc, &d_o, &dws, &dbs, &dtau})
      r.sums.insert(r.sums.end(), v->begin(), v->end());
    return r;
  }

  static void check(const Result& c, const Result& h) {
    for (std::size_t i = 0; i < h.points.size(); ++i)
      MPI_CHECK(test::rel_error(c.points[i], h.points[i]) < 2e-5);
    // The sums over all points (float64, other summation orders): the last points count too.
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < h.sums.size(); ++i) {
      worst = std::max(worst, std::abs(c.sums[i] - h.sums[i]));
      scale = std::max(scale, std::abs(h.sums[i]));
    }
    INFO("sums: worst difference " << worst << " of " << scale);
    MPI_CHECK(worst <= 1e-9 * scale);
  }
};

TEST_CASE("CUDA physics attention covers more points than a capped grid holds", "[gpu]") {
  // The point passes take one thread per point (and per point x slice tile): 9,000,001
  // points are more than 65535 blocks of 128 threads, so a grid capped there would leave the
  // last points unsliced, undesliced and without gradients, with no error.
  if (!test::have_device()) return;
  const PhysicsKernelCase k({.batch = 1, .heads = 1, .dim = 2, .slices = 3, .points = 9000001});
  PhysicsKernelCase::check(k.run(MemSpace::Cuda), k.run(MemSpace::Host));
}

// Hidden ([.full_cache]): it leaves the device almost no free memory for a moment, so it runs
// alone, on one rank (ctest's gpu_full_cache, RUN_SERIAL; scripts/gpu-check.sh after the
// parallel GPU tests), never beside other GPU tests or ranks sharing the device.
TEST_CASE("CUDA kernels that spill to local memory launch beside a full device cache",
          "[gpu][.full_cache]") {
  // The 128-wide register buckets (128 slices, 128 channels per head) keep per-thread arrays in
  // local memory, which the driver reserves for every resident thread at the first launch,
  // outside the tracked allocator. With the cache holding nearly all the device's memory that
  // reservation fails unless the launch gives the cache back and tries again.
  if (!test::have_device()) return;
  const PhysicsKernelCase physics(
      {.batch = 2, .heads = 2, .dim = 3, .slices = 128, .points = 3001});
  const PhysicsKernelCase::Result physics_host = physics.run(MemSpace::Host);
  kernels::NeighborhoodDesc d;
  d.nd = 2;
  d.batch = 2;
  d.dim = 128;
  d.extent[0] = d.q_shape[0] = d.f_shape[0] = 9;
  d.extent[1] = d.q_shape[1] = d.f_shape[1] = 11;
  d.kernel[0] = d.kernel[1] = 3;
  d.type = DType::f32;
  const Index cells = 9 * 11;
  const Tensor q = rnd({2, 128, cells}, DType::f32, 11), kv = rnd({2, 256, cells}, DType::f32, 12),
               g = rnd({2, 128, cells}, DType::f32, 13);
  const auto nb_host = neighbourhood_run(d, q, kv, g, MemSpace::Host);

  // Fill the cache: 64 MiB blocks until less than 128 MiB stays free, all freed to the cache
  // (before each kernel family: a retry gives the whole cache back).
  auto fill_cache = [] {
    release_cached_device_memory();
    const std::size_t block = std::size_t{64} << 20;
    std::vector<void*> held;
    while (device::free_bytes() > 2 * block) held.push_back(mem_alloc(MemSpace::Cuda, block));
    for (void* p : held) mem_free(MemSpace::Cuda, p, block);
    return held.size();
  };
  const std::size_t nb_blocks = fill_cache();
  const auto nb = neighbourhood_run(d, q, kv, g, MemSpace::Cuda);
  const std::size_t nb_left = cached_device_bytes() >> 20;
  const std::size_t physics_blocks = fill_cache();
  const PhysicsKernelCase::Result physics_cuda = physics.run(MemSpace::Cuda);
  const std::size_t physics_left = cached_device_bytes() >> 20;
  release_cached_device_memory();
  INFO("64 MiB blocks cached: " << nb_blocks << " and " << physics_blocks
                                << "; MiB still cached after the launches: " << nb_left << " and "
                                << physics_left);
  for (std::size_t i = 0; i < nb.size(); ++i) MPI_CHECK(test::rel_error(nb[i], nb_host[i]) < 2e-5);
  PhysicsKernelCase::check(physics_cuda, physics_host);
}

TEST_CASE("neighbourhood attention on CUDA tensors equals one host rank, every gradient", "[gpu]") {
  if (!test::have_device()) return;
  const Mesh mesh = Mesh::line(test::harness_comm(), "x");
  std::mt19937 rng(7);
  // Shards thinner than the window at 2-3 ranks.
  for (const test::NeighborhoodCase& c : test::neighborhood_cases())
    for (bool uneven : {false, true})
      for (DType dt : {DType::f64, DType::f32}) {
        const NeighborhoodAttentionOptions host = test::neighborhood_options(c, dt),
                                           o = test::neighborhood_options(c, dt, MemSpace::Cuda);
        const ShardSpec spec = test::conv_spec(mesh, c.shape, rng, uneven);
        const auto r = test::compare_with_one_rank(
            mesh, spec, [&] { return std::make_unique<NeighborhoodAttention>(o); }, dt,
            MemSpace::Cuda, 12, [&] { return std::make_unique<NeighborhoodAttention>(host); },
            MemSpace::Host);
        INFO(spec.str() << " " << name_of(dt) << ": " << r.str());
        MPI_CHECK(r.worst() < (dt == DType::f64 ? 1e-11 : 1e-5));
      }
}

TEST_CASE("physics attention on CUDA tensors equals one host rank, every gradient", "[gpu]") {
  if (!test::have_device()) return;
  const Mesh mesh = Mesh::line(test::harness_comm(), "points");
  std::mt19937 rng(8);
  for (int nd : {1, 2})
    for (bool uneven : {false, true})
      for (DType dt : {DType::f64, DType::f32}) {
        const PhysicsAttentionOptions host = test::physics_options(nd, dt),
                                      o = test::physics_options(nd, dt, MemSpace::Cuda);
        // 300 points in 1-D: tiles of 256 and a partial one on one rank.
        const std::vector<Index> shape =
            nd == 1 ? std::vector<Index>{2, 3, 300} : std::vector<Index>{2, 3, 9, 7};
        const ShardSpec spec = test::conv_spec(mesh, shape, rng, uneven);
        const auto c = test::compare_with_one_rank(
            mesh, spec, [&] { return std::make_unique<PhysicsAttention>(o); }, dt, MemSpace::Cuda,
            21 + nd, [&] { return std::make_unique<PhysicsAttention>(host); }, MemSpace::Host);
        INFO(spec.str() << " " << name_of(dt) << ": " << c.str());
        MPI_CHECK(c.worst() < (dt == DType::f64 ? 1e-11 : 1e-5));
      }
}
