// Ring attention on a sharded sequence against the local kernel on the whole sequence (one
// rank): output and the gradients of q, k and v, float64 to 1e-11 and float32 to 1e-5,
// balanced and random uneven shards (empty and length-1 blocks included), causal or not,
// on a 1-D mesh and on a 2-D mesh with the batch sharded on the other axis.
#include <random>

#include "kernels/attention.hpp"
#include "runtime/attention/ring_attention.hpp"
#include "tests/harness/mpi_test.hpp"
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
  kernels::attention_backward(Device::host(), a, q.raw(), k.raw(), v.raw(), f.out.raw(),
                              dout.raw(), lse.data<double>(), f.dq.raw(), f.dk.raw(), f.dv.raw());
  return f;
}

}  // namespace

TEST_CASE("ring attention equals attention over the whole sequence") {
  MPI_Comm comm = test::harness_comm();
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<std::pair<Mesh, int>> meshes;  // mesh and the axis of the sequence
  meshes.push_back({Mesh::line(comm, "seq"), 0});
  if (P % 2 == 0) meshes.push_back({Mesh(comm, {2, P / 2}, {"data", "seq"}), 1});
  std::mt19937 rng(3);
  for (const auto& [mesh, axis] : meshes)
    for (bool uneven : {false, true})
      for (bool causal : {false, true})
        for (DType dt : {DType::f64, DType::f32}) {
          const std::vector<Index> shape{4, 13, 5};
          std::vector<std::vector<Index>> sizes(3);
          if (uneven) sizes[1] = test::random_sizes(rng, shape[1], mesh.dim(axis));
          std::vector<Placement> dims{Replicate(), Shard(axis), Replicate()};
          if (mesh.ndim() == 2) dims[0] = Shard(0);  // the batch over "data"
          const ShardSpec spec(shape, dims, mesh, {}, sizes);
          const Tensor q = test::random_tensor(shape, dt, 1), k = test::random_tensor(shape, dt, 2),
                       v = test::random_tensor(shape, dt, 3), g = test::random_tensor(shape, dt, 4);
          const Full want = one_rank(q, k, v, g, causal);
          RingAttentionOptions o;
          o.axis = axis;
          o.causal = causal;
          RingAttention ring(o);
          const ShardTensor out = ring.forward(ShardTensor::scatter(mesh, q, spec),
                                               ShardTensor::scatter(mesh, k, spec),
                                               ShardTensor::scatter(mesh, v, spec));
          const auto grads = ring.backward(ShardTensor::scatter(mesh, g, spec));
          const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
          INFO(mesh.str() << " " << spec.str() << (causal ? " causal " : " ") << name_of(dt));
          MPI_CHECK(test::rel_error(out.gather_all(), want.out) < tol);
          MPI_CHECK(test::rel_error(grads[0].gather_all(), want.dq) < tol);
          MPI_CHECK(test::rel_error(grads[1].gather_all(), want.dk) < tol);
          MPI_CHECK(test::rel_error(grads[2].gather_all(), want.dv) < tol);
        }
}

TEST_CASE("ring attention refuses layouts it cannot take") {
  const Mesh line = Mesh::line(test::harness_comm());
  const std::vector<Index> shape{2, 6, 3};
  const Tensor x = test::random_tensor(shape, DType::f64, 1);
  const ShardTensor d = ShardTensor::scatter(line, x, {Replicate(), Replicate(), Shard(0)});
  RingAttention ring({});
  MPI_CHECK(test::throws_with([&] { ring.forward(d, d, d); }, "must be sharded on mesh axis 0"));
  MPI_CHECK(test::throws_with([&] { ring.backward(d); }, "backward before forward"));
}
