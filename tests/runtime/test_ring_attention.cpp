// Ring attention on a sharded sequence against the local kernel on the whole sequence (one
// rank): output and the gradients of q, k and v, float64 to 1e-11 and float32 to 1e-5,
// balanced and random uneven shards (empty and length-1 blocks included), causal or not,
// on a 1-D mesh and on a 2-D mesh with the batch sharded on the other axis; bfloat16 inputs
// give the float32 answer of the rounded inputs, rounded (the blocks travel as bf16, the
// partial outputs, merges and travelling key/value gradients stay float32).
#include <array>
#include <cmath>
#include <random>

#include "kernels/attention.hpp"
#include "runtime/attention/ring_attention.hpp"
#include "runtime/attention/sequence_attention.hpp"
#include "runtime/tensor/tensor_math.hpp"
#include "runtime/attention/zigzag_ring.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/bf16.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/layer_check.hpp"

using namespace tessera;

namespace {

struct Full {
  Tensor out, dq, dk, dv;
};

Full one_rank(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal) {
  kernels::AttentionDesc a;
  a.batch = q.shape(0);
  a.sq = q.shape(1);
  a.sk = k.shape(1);
  a.d = q.shape(2);
  a.causal = causal;
  a.type = q.dtype();
  Full f{Tensor::empty(q.shape(), q.dtype()), Tensor::empty(q.shape(), q.dtype()),
         Tensor::empty(k.shape(), k.dtype()), Tensor::empty(k.shape(), k.dtype())};
  Tensor lse = Tensor::empty({a.batch, a.sq}, DType::f64);
  kernels::attention_forward(Device::host(), a, q.raw(), k.raw(), v.raw(), f.out.raw(),
                             lse.data<double>());
  kernels::attention_backward(Device::host(), a, q.raw(), k.raw(), v.raw(), f.out.raw(), dout.raw(),
                              lse.data<double>(), f.dq.raw(), f.dk.raw(), f.dv.raw());
  return f;
}

// Causal zig-zag ring attention of q, k, v (all laid out by `spec`) and its backward of g:
// the output, the gradients of q, k, v, and the chunk pairs this rank computed.
struct ZigZagRun {
  ShardTensor out;
  std::array<ShardTensor, 3> grads;
  int pairs;
};
ZigZagRun run_zigzag(const Mesh& mesh, int axis, const ShardSpec& spec, const Tensor& q,
                     const Tensor& k, const Tensor& v, const Tensor& g) {
  RingAttentionOptions o;
  o.axis = axis;
  o.causal = true;
  ZigZagRingAttention zz(o);
  ZigZagRun r;
  r.out = zz.forward(ShardTensor::scatter(mesh, q, spec), ShardTensor::scatter(mesh, k, spec),
                     ShardTensor::scatter(mesh, v, spec));
  r.grads = zz.backward(ShardTensor::scatter(mesh, g, spec));
  r.pairs = zz.pairs_computed();
  return r;
}

// The meshes every case runs on, each with the axis of the sequence: a line, and data x
// sequence where the ranks split in two.
std::vector<std::pair<Mesh, int>> sequence_meshes(MPI_Comm comm) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<std::pair<Mesh, int>> meshes;
  meshes.push_back({Mesh::line(comm, "seq"), 0});
  if (P % 2 == 0) meshes.push_back({Mesh(comm, {2, P / 2}, {"data", "seq"}), 1});
  return meshes;
}

}  // namespace

TEST_CASE("ring, all-to-all and all-gather attention equal attention over the whole sequence") {
  const auto meshes = sequence_meshes(test::harness_comm());
  std::mt19937 rng(3);
  for (const auto& [mesh, axis] : meshes)
    for (bool uneven : {false, true})
      for (bool causal : {false, true})
        for (DType dt : {DType::f64, DType::f32})
          for (auto algo : {SequenceAlgorithm::Ring, SequenceAlgorithm::AllToAll,
                            SequenceAlgorithm::AllGather, SequenceAlgorithm::Auto}) {
            if (algo == SequenceAlgorithm::AllToAll && mesh.ndim() == 2) continue;  // dim 0 taken
            const std::vector<Index> shape{4, 13, 5};
            std::vector<std::vector<Index>> sizes(3);
            if (uneven) sizes[1] = test::random_sizes(rng, shape[1], mesh.dim(axis));
            std::vector<Placement> dims{Replicate(), Shard(axis), Replicate()};
            if (mesh.ndim() == 2) dims[0] = Shard(0);  // the batch over "data"
            const ShardSpec spec(shape, dims, mesh, {}, sizes);
            const Tensor q = test::random_tensor(shape, dt, 1),
                         k = test::random_tensor(shape, dt, 2),
                         v = test::random_tensor(shape, dt, 3),
                         g = test::random_tensor(shape, dt, 4);
            const Full want = one_rank(q, k, v, g, causal);
            RingAttentionOptions o;
            o.axis = axis;
            o.causal = causal;
            SequenceAttention ring(o, algo);
            const ShardTensor out = ring.forward(ShardTensor::scatter(mesh, q, spec),
                                                 ShardTensor::scatter(mesh, k, spec),
                                                 ShardTensor::scatter(mesh, v, spec));
            const auto grads = ring.backward(ShardTensor::scatter(mesh, g, spec));
            const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
            INFO(mesh.str() << " " << spec.str() << (causal ? " causal " : " ") << name_of(dt)
                            << " " << ring.describe());
            MPI_CHECK(test::rel_error(out.gather_all(), want.out) < tol);
            MPI_CHECK(test::rel_error(grads[0].gather_all(), want.dq) < tol);
            MPI_CHECK(test::rel_error(grads[1].gather_all(), want.dk) < tol);
            MPI_CHECK(test::rel_error(grads[2].gather_all(), want.dv) < tol);
          }
}

TEST_CASE("a NaN token makes the same entries NaN sharded as over the whole sequence") {
  // One NaN in a key and one in a query: every row that sees the key, the query's row, and
  // the keys that row sees are NaN, whatever block they travel in (a NaN partial LSE had been
  // taken for a block with no visible key and dropped from the merge: finite, wrong answers).
  const auto meshes = sequence_meshes(test::harness_comm());
  auto nan_mask = [](const Tensor& t) {
    std::vector<int> m(static_cast<std::size_t>(t.numel()));
    const Tensor d = converted(t, DType::f64);
    for (Index i = 0; i < t.numel(); ++i)
      m[static_cast<std::size_t>(i)] = std::isnan(d.data<double>()[i]);
    return m;
  };
  auto without_nans = [](const Tensor& t) {
    Tensor d = converted(t, DType::f64).clone();  // converted() may return t itself
    for (Index i = 0; i < d.numel(); ++i)
      if (std::isnan(d.data<double>()[i])) d.data<double>()[i] = 0;
    return d;
  };
  for (const auto& [mesh, axis] : meshes)
    for (bool causal : {false, true})
      for (DType dt : {DType::f64, DType::f32})
        for (auto algo :
             {SequenceAlgorithm::Ring, SequenceAlgorithm::AllToAll, SequenceAlgorithm::AllGather}) {
          if (algo == SequenceAlgorithm::AllToAll && mesh.ndim() == 2) continue;
          const std::vector<Index> shape{4, 13, 5};
          std::vector<Placement> dims{Replicate(), Shard(axis), Replicate()};
          if (mesh.ndim() == 2) dims[0] = Shard(0);
          const ShardSpec spec(shape, dims, mesh);
          Tensor q = converted(test::random_tensor(shape, DType::f64, 1), DType::f64),
                 k = converted(test::random_tensor(shape, DType::f64, 2), DType::f64);
          q.data<double>()[(2 * 13 + 3) * 5] = std::nan("");
          k.data<double>()[(1 * 13 + 7) * 5 + 2] = std::nan("");
          q = converted(q, dt);
          k = converted(k, dt);
          const Tensor v = test::random_tensor(shape, dt, 3), g = test::random_tensor(shape, dt, 4);
          const Full want = one_rank(q, k, v, g, causal);
          RingAttentionOptions o;
          o.axis = axis;
          o.causal = causal;
          SequenceAttention attn(o, algo);
          const ShardTensor out =
              attn.forward(ShardTensor::scatter(mesh, q, spec), ShardTensor::scatter(mesh, k, spec),
                           ShardTensor::scatter(mesh, v, spec));
          const auto grads = attn.backward(ShardTensor::scatter(mesh, g, spec));
          INFO(mesh.str() << (causal ? " causal " : " ") << name_of(dt) << " " << attn.describe());
          const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
          const Tensor got[] = {out.gather_all(), grads[0].gather_all(), grads[1].gather_all(),
                                grads[2].gather_all()};
          const Tensor* ref[] = {&want.out, &want.dq, &want.dk, &want.dv};
          for (int i = 0; i < 4; ++i) {
            MPI_CHECK(nan_mask(got[i]) == nan_mask(*ref[i]));
            MPI_CHECK(test::rel_error(without_nans(got[i]), without_nans(*ref[i])) < tol);
          }
          const std::vector<int> m = nan_mask(want.out);
          MPI_CHECK(m[(2 * 13 + 3) * 5] == 1);                 // the NaN query's row
          MPI_CHECK(m[(1 * 13 + 8) * 5] == 1);                 // a row that sees the NaN key
          MPI_CHECK(m[(1 * 13 + 6) * 5] == (causal ? 0 : 1));  // before it: sees it unless causal
          MPI_CHECK(m[(3 * 13 + 8) * 5] == 0);                 // another problem
        }
  // The zig-zag ring skips chunk pairs no query of a chunk sees: its output is NaN exactly as
  // one rank's, its gradients at least for every row and key that sees a NaN (the float64
  // one-rank set; the float32 one-rank path also makes masked pairs' entries NaN).
  auto covers = [&](const Tensor& t, const Tensor& minimal) {
    const std::vector<int> m = nan_mask(t), must = nan_mask(minimal);
    for (std::size_t i = 0; i < m.size(); ++i)
      if (must[i] && !m[i]) return false;
    return true;
  };
  auto finite_error = [&](const Tensor& a, const Tensor& b) {  // NaN on either side: skipped
    Tensor x = without_nans(a), y = without_nans(b);
    const std::vector<int> ma = nan_mask(a), mb = nan_mask(b);
    for (std::size_t i = 0; i < ma.size(); ++i)
      if (ma[i] || mb[i]) x.data<double>()[i] = y.data<double>()[i] = 0;
    return test::rel_error(x, y);
  };
  for (const auto& [mesh, axis] : meshes)
    for (DType dt : {DType::f64, DType::f32}) {
      const std::vector<Index> shape{4, 13, 5};
      std::vector<Placement> dims{Replicate(), Shard(axis), Replicate()};
      if (mesh.ndim() == 2) dims[0] = Shard(0);
      const ShardSpec spec(shape, dims, mesh);
      Tensor q64 = test::random_tensor(shape, DType::f64, 1).clone(),
             k64 = test::random_tensor(shape, DType::f64, 2).clone();
      q64.data<double>()[(2 * 13 + 3) * 5] = std::nan("");
      k64.data<double>()[(1 * 13 + 7) * 5 + 2] = std::nan("");
      const Tensor v64 = test::random_tensor(shape, DType::f64, 3),
                   g64 = test::random_tensor(shape, DType::f64, 4);
      const Full minimal = one_rank(q64, k64, v64, g64, true);
      const Tensor q = converted(q64, dt), k = converted(k64, dt), v = converted(v64, dt),
                   g = converted(g64, dt);
      const Full want = one_rank(q, k, v, g, true);
      const auto [out, grads, pairs] = run_zigzag(mesh, axis, spec, q, k, v, g);
      INFO(mesh.str() << " zig-zag " << name_of(dt));
      const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
      MPI_CHECK(nan_mask(out.gather_all()) == nan_mask(want.out));
      MPI_CHECK(finite_error(out.gather_all(), want.out) < tol);
      const Tensor* mins[] = {&minimal.dq, &minimal.dk, &minimal.dv};
      const Tensor* refs[] = {&want.dq, &want.dk, &want.dv};
      for (int i = 0; i < 3; ++i) {
        const Tensor got = grads[static_cast<std::size_t>(i)].gather_all();
        MPI_CHECK(covers(got, *mins[i]));
        MPI_CHECK(finite_error(got, *refs[i]) < tol);
      }
    }
}

TEST_CASE("auto picks all-to-all, all-gather or the ring by size; refusals") {
  const Mesh line = Mesh::line(test::harness_comm());
  const std::vector<Index> shape{8, 6, 3};
  const Tensor x = test::random_tensor(shape, DType::f64, 1);
  const ShardTensor s = ShardTensor::scatter(line, x, {Replicate(), Shard(0), Replicate()});
  SequenceAttention a({});
  a.forward(s, s, s);
  MPI_CHECK(a.chosen() ==
            (line.size() <= 8 ? SequenceAlgorithm::AllToAll : SequenceAlgorithm::Ring));
  MPI_CHECK(a.describe().find("(auto)") != std::string::npos);
  // Fewer problems than ranks: a short sequence is gathered, a long one goes round the ring.
  if (line.size() > 1) {
    const std::vector<Index> one{1, 6, 3};
    const ShardTensor o = ShardTensor::scatter(line, test::random_tensor(one, DType::f64, 2),
                                               {Replicate(), Shard(0), Replicate()});
    SequenceAttention b({});
    b.forward(o, o, o);
    MPI_CHECK(b.chosen() == SequenceAlgorithm::AllGather);
    const std::vector<Index> long_seq{1, 4096, 64};  // 2 MiB of K and V in float32
    const ShardTensor l = ShardTensor::scatter(line, Tensor::zeros(long_seq, DType::f32),
                                               {Replicate(), Shard(0), Replicate()});
    SequenceAttention c({});
    c.forward(l, l, l);
    MPI_CHECK(c.chosen() == SequenceAlgorithm::Ring);
  }
  MPI_CHECK(test::throws_with([] { sequence_algorithm_from_name("ulysses"); }, "all_to_all"));
}

TEST_CASE("ring attention refuses layouts it cannot take") {
  const Mesh line = Mesh::line(test::harness_comm());
  const std::vector<Index> shape{2, 6, 3};
  const Tensor x = test::random_tensor(shape, DType::f64, 1);
  const ShardTensor d = ShardTensor::scatter(line, x, {Replicate(), Replicate(), Shard(0)});
  RingAttention ring({});
  MPI_CHECK(test::throws_with([&] { ring.forward(d, d, d); }, "must be sharded on mesh axis 0"));
  MPI_CHECK(test::throws_with([&] { ring.backward(d); }, "backward before forward"));
  // An axis the mesh lacks is named (was std::vector's range error), by every algorithm.
  const ShardTensor s = ShardTensor::scatter(line, x, {Replicate(), Shard(0), Replicate()});
  RingAttentionOptions off;
  off.axis = 1;
  RingAttention far(off);
  SequenceAttention far_auto(off);
  MPI_CHECK(test::throws_with([&] { far.forward(s, s, s); }, "mesh axis 1 does not exist"));
  MPI_CHECK(test::throws_with([&] { far_auto.forward(s, s, s); }, "mesh axis 1 does not exist"));
  // v of another head dim than k: said so, not "laid out differently".
  const ShardTensor v4 = ShardTensor::scatter(line, test::random_tensor({2, 6, 4}, DType::f64, 2),
                                              {Replicate(), Shard(0), Replicate()});
  MPI_CHECK(test::throws_with([&] { ring.forward(s, s, v4); }, "differ in shape"));
  // Layers built with other options on one rank (another algorithm: a hang in the transfers;
  // another causal flag or scale: another function) are refused on every rank at their first
  // forward, naming what differs.
  if (line.size() > 1) {
    const bool last = test::world_rank() == line.size() - 1;
    RingAttentionOptions o;
    o.causal = last;
    RingAttention causal_on_one(o);
    MPI_CHECK_ERROR(causal_on_one.forward(s, s, s),
                    "ring attention: ranks disagree on the options");
    o = RingAttentionOptions();
    o.scale = last ? 0.5 : 0.0;
    SequenceAttention scaled_on_one(o, SequenceAlgorithm::AllGather);
    MPI_CHECK_ERROR(scaled_on_one.forward(s, s, s), "scale 0.5");
    SequenceAttention other_algorithm(
        {}, last ? SequenceAlgorithm::Ring : SequenceAlgorithm::AllGather);
    MPI_CHECK_ERROR(other_algorithm.forward(s, s, s), "sequence attention: ranks disagree");
    o = RingAttentionOptions();
    o.causal = true;
    o.scale = last ? 0.25 : 0.0;
    ZigZagRingAttention zigzag(o);
    MPI_CHECK_ERROR(zigzag.forward(s, s, s), "zig-zag ring attention: ranks disagree");
    // Agreed once: the next forward runs.
    SequenceAttention same({}, SequenceAlgorithm::AllGather);
    MPI_CHECK(same.forward(s, s, s).local().numel() == s.local().numel());
    MPI_CHECK(same.forward(s, s, s).local().numel() == s.local().numel());
  }
}

TEST_CASE(
    "ring, all-to-all and all-gather attention with a key-dependent bias and masks equal "
    "the whole sequence") {
  const auto meshes = sequence_meshes(test::harness_comm());
  std::mt19937 rng(5);
  for (const auto& [mesh, axis] : meshes)
    for (Index bb : {Index{1}, Index{4}})
      for (bool causal : {false, true})
        for (DType dt : {DType::f64, DType::f32}) {
          const std::vector<Index> shape{4, 11, 3};
          std::vector<std::vector<Index>> sizes(3);
          sizes[1] = test::random_sizes(rng, shape[1], mesh.dim(axis));
          std::vector<Placement> dims{Replicate(), Shard(axis), Replicate()};
          if (mesh.ndim() == 2) dims[0] = Shard(0);
          const ShardSpec spec(shape, dims, mesh, {}, sizes);
          const Tensor q = test::random_tensor(shape, dt, 1), k = test::random_tensor(shape, dt, 2),
                       v = test::random_tensor(shape, dt, 3), g = test::random_tensor(shape, dt, 4);
          // A bias with about one masked key in six (never a whole row: the diagonal stays).
          Tensor bias = test::random_tensor({bb, 11, 11}, dt, 5);
          for (Index b = 0; b < bb; ++b)
            for (Index i = 0; i < 11; ++i)
              for (Index j = 0; j < 11; ++j)
                if (j != i && (i * 7 + j * 3 + b) % 6 == 0) {
                  if (dt == DType::f64)
                    bias.at<double>({b, i, j}) = -INFINITY;
                  else
                    bias.at<float>({b, i, j}) = -INFINITY;
                }
          // The whole sequence on one rank, with the bias's gradient.
          kernels::AttentionDesc a;
          a.batch = 4;
          a.sq = a.sk = 11;
          a.d = 3;
          a.causal = causal;
          a.type = dt;
          a.bias = bias.raw();
          a.bias_batch_stride = bb == 1 ? 0 : 121;
          Tensor out = Tensor::empty(shape, dt), dq = Tensor::empty(shape, dt),
                 dk = Tensor::empty(shape, dt), dv = Tensor::empty(shape, dt),
                 db = Tensor::empty({4, 11, 11}, dt), lse = Tensor::empty({4, 11}, DType::f64);
          kernels::attention_forward(Device::host(), a, q.raw(), k.raw(), v.raw(), out.raw(),
                                     lse.data<double>());
          kernels::attention_backward(Device::host(), a, q.raw(), k.raw(), v.raw(), out.raw(),
                                      g.raw(), lse.data<double>(), dq.raw(), dk.raw(), dv.raw(),
                                      db.raw());
          Tensor want_db = db;
          if (bb == 1) {
            want_db = Tensor::zeros({1, 11, 11}, dt);
            for (Index b = 0; b < 4; ++b)
              for (Index i = 0; i < 121; ++i) {
                if (dt == DType::f64)
                  want_db.data<double>()[i] += db.data<double>()[b * 121 + i];
                else
                  want_db.data<float>()[i] += db.data<float>()[b * 121 + i];
              }
          }
          std::vector<Placement> bdims{bb == 1 ? Replicate() : dims[0], Shard(axis), Replicate()};
          const ShardSpec bspec({bb, 11, 11}, bdims, mesh, {}, {{}, sizes[1], {}});
          RingAttentionOptions o;
          o.axis = axis;
          o.causal = causal;
          for (SequenceAlgorithm algo : {SequenceAlgorithm::Ring, SequenceAlgorithm::AllToAll,
                                         SequenceAlgorithm::AllGather}) {
            // All-to-all splits the (batch x head) problems: not where a data axis has them.
            if (algo == SequenceAlgorithm::AllToAll && dims[0].sharded()) continue;
            SequenceAttention attn(o, algo);
            const ShardTensor y = attn.forward(
                ShardTensor::scatter(mesh, q, spec), ShardTensor::scatter(mesh, k, spec),
                ShardTensor::scatter(mesh, v, spec), ShardTensor::scatter(mesh, bias, bspec));
            const auto grads = attn.backward(ShardTensor::scatter(mesh, g, spec));
            const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
            INFO(mesh.str() << " " << spec.str() << " " << name_of(algo) << " bias batch " << bb
                            << (causal ? " causal " : " ") << name_of(dt));
            MPI_CHECK(attn.chosen() == algo);
            MPI_CHECK(test::rel_error(y.gather_all(), out) < tol);
            MPI_CHECK(test::rel_error(grads[0].gather_all(), dq) < tol);
            MPI_CHECK(test::rel_error(grads[1].gather_all(), dk) < tol);
            MPI_CHECK(test::rel_error(grads[2].gather_all(), dv) < tol);
            MPI_CHECK(test::rel_error(attn.bias_grad().gather_all(), want_db) < tol);
          }
        }
}

TEST_CASE("a batch split that differs between q and k or the bias is refused") {
  // The kernels read each rank's batch rows of q, k and the bias as one: another split of
  // the same placement read past a buffer (a crash, a hang, wrong answers).
  int n = 0;
  MPI_Comm_size(test::harness_comm(), &n);
  if (n % 2 != 0) return;
  const Mesh mesh(test::harness_comm(), {2, n / 2}, {"data", "seq"});
  const std::vector<Placement> dims{Shard(0), Shard(1), Replicate()};
  const std::vector<Index> shape{4, 6, 3}, bias_shape{4, 6, 6};
  const ShardSpec uneven(shape, dims, mesh, {}, {{3, 1}, {}, {}});
  const ShardTensor q =
      ShardTensor::scatter(mesh, test::random_tensor(shape, DType::f64, 1), uneven);
  const ShardTensor kv =
      ShardTensor::scatter(mesh, test::random_tensor(shape, DType::f64, 2), dims);
  const ShardTensor bias =
      ShardTensor::scatter(mesh, test::random_tensor(bias_shape, DType::f64, 3), dims);
  RingAttentionOptions o;
  o.axis = 1;
  for (SequenceAlgorithm a :
       {SequenceAlgorithm::Ring, SequenceAlgorithm::AllGather, SequenceAlgorithm::Auto}) {
    SequenceAttention att(o, a);
    MPI_CHECK_ERROR(att.forward(q, kv, kv), "its split too");
    SequenceAttention with_bias(o, a);
    MPI_CHECK_ERROR(with_bias.forward(q, q, q, bias), "the bias's batch is laid out");
  }
  RingAttention ring(o);
  MPI_CHECK_ERROR(ring.forward(q, kv, kv), "its split too");
}

TEST_CASE("zig-zag ring attention equals causal attention over the whole sequence, balanced") {
  const auto meshes = sequence_meshes(test::harness_comm());
  std::mt19937 rng(11);
  for (const auto& [mesh, axis] : meshes)
    for (bool uneven : {false, true})
      for (DType dt : {DType::f64, DType::f32}) {
        const std::vector<Index> shape{4, 37, 5};
        std::vector<std::vector<Index>> sizes(3);
        if (uneven) sizes[1] = test::random_sizes(rng, shape[1], mesh.dim(axis));
        std::vector<Placement> dims{Replicate(), Shard(axis), Replicate()};
        if (mesh.ndim() == 2) dims[0] = Shard(0);
        const ShardSpec spec(shape, dims, mesh, {}, sizes);
        const Tensor q = test::random_tensor(shape, dt, 1), k = test::random_tensor(shape, dt, 2),
                     v = test::random_tensor(shape, dt, 3), g = test::random_tensor(shape, dt, 4);
        const Full want = one_rank(q, k, v, g, true);
        const auto [out, grads, pairs] = run_zigzag(mesh, axis, spec, q, k, v, g);
        const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
        const int ranks = mesh.dim(axis);
        INFO(mesh.str() << " " << spec.str() << " " << name_of(dt) << ": " << pairs
                        << " chunk pairs here");
        MPI_CHECK(test::rel_error(out.gather_all(), want.out) < tol);
        MPI_CHECK(test::rel_error(grads[0].gather_all(), want.dq) < tol);
        MPI_CHECK(test::rel_error(grads[1].gather_all(), want.dk) < tol);
        MPI_CHECK(test::rel_error(grads[2].gather_all(), want.dv) < tol);
        // The balance: every rank computes 2P + 1 chunk pairs (no chunk is empty here).
        MPI_CHECK(pairs == 2 * ranks + 1);
      }
  MPI_CHECK(test::throws_with([] { ZigZagRingAttention bad({}); }, "set causal"));
}

TEST_CASE("bfloat16 sequence attention: float32 sums, every algorithm, the answer rounded") {
  const auto meshes = sequence_meshes(test::harness_comm());
  std::mt19937 rng(5);
  for (const auto& [mesh, axis] : meshes)
    for (bool causal : {false, true})
      for (int algo = 0; algo < 4; ++algo) {          // ring, all-to-all, all-gather, zig-zag
        if (algo == 1 && mesh.ndim() == 2) continue;  // dim 0 taken
        if (algo == 3 && !causal) continue;           // zig-zag balances causal attention
        const std::vector<Index> shape{4, 29, 8};
        std::vector<std::vector<Index>> sizes(3);
        if (algo != 3) sizes[1] = test::random_sizes(rng, shape[1], mesh.dim(axis));
        std::vector<Placement> dims{Replicate(), Shard(axis), Replicate()};
        if (mesh.ndim() == 2) dims[0] = Shard(0);
        const ShardSpec spec(shape, dims, mesh, {}, sizes);
        const auto [qb, qf] = test::rounded_bf16(test::random_tensor(shape, DType::f32, 1));
        const auto [kb, kf] = test::rounded_bf16(test::random_tensor(shape, DType::f32, 2));
        const auto [vb, vf] = test::rounded_bf16(test::random_tensor(shape, DType::f32, 3));
        const auto [gb, gf] = test::rounded_bf16(test::random_tensor(shape, DType::f32, 4));
        const Full want = one_rank(qf, kf, vf, gf, causal);
        RingAttentionOptions o;
        o.axis = axis;
        o.causal = causal;
        ShardTensor out;
        std::array<ShardTensor, 3> grads;
        auto run = [&](auto& attn) {
          out = attn.forward(ShardTensor::scatter(mesh, qb, spec),
                             ShardTensor::scatter(mesh, kb, spec),
                             ShardTensor::scatter(mesh, vb, spec));
          grads = attn.backward(ShardTensor::scatter(mesh, gb, spec));
        };
        if (algo == 3) {
          ZigZagRingAttention zz(o);
          run(zz);
        } else {
          SequenceAttention sa(o, algo == 0   ? SequenceAlgorithm::Ring
                                  : algo == 1 ? SequenceAlgorithm::AllToAll
                                              : SequenceAlgorithm::AllGather);
          run(sa);
        }
        INFO(mesh.str() << " " << spec.str() << (causal ? " causal" : "") << ", algorithm "
                        << algo);
        MPI_CHECK(out.dtype() == DType::bf16 && grads[1].dtype() == DType::bf16);
        MPI_CHECK(test::within_one_bf16_unit(out.gather_all(), want.out));
        MPI_CHECK(test::within_one_bf16_unit(grads[0].gather_all(), want.dq));
        MPI_CHECK(test::within_one_bf16_unit(grads[1].gather_all(), want.dk));
        MPI_CHECK(test::within_one_bf16_unit(grads[2].gather_all(), want.dv));
      }
}
