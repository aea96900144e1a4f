#pragma once
// Checks for sharded layers: scatter -> sharded layer -> gather against the same layer on
// one rank (a mesh over MPI_COMM_SELF holding the full tensor), forward and every gradient,
// and float64 central finite differences of <layer(x), w> on one rank.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/nn/layer.hpp"
#include "tests/support/random_tensor.hpp"

namespace tessera::test::ops {

using LayerFactory = std::function<std::unique_ptr<Layer>()>;

using test::random_tensor;
using test::value_at;

// max |a - b| / max |b| (b the reference); 0 when both are empty or b is all zero and a == b.
inline double rel_error(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return 1e300;
  const Tensor x = a.to(MemSpace::Host), y = b.to(MemSpace::Host);
  double diff = 0, scale = 0;
  for (Index i = 0; i < x.numel(); ++i) {
    const double p = value_at(x, i), q = value_at(y, i);
    if (std::isnan(p) != std::isnan(q)) return 1e300;
    diff = std::max(diff, std::abs(p - q));
    scale = std::max(scale, std::abs(q));
  }
  if (diff == 0) return 0;
  return scale > 0 ? diff / scale : 1e300;
}

inline double tolerance(DType dt) {
  return dt == DType::f64 ? 1e-11 : 1e-5;
}

// Sets every parameter of `l` to deterministic values (the same for the same seed), so a
// sharded layer and its single-rank reference carry equal parameters.
inline void randomize_parameters(Layer& l, unsigned seed) {
  for (Parameter* p : l.parameters()) {
    const Tensor v = random_tensor(p->value.shape(), p->value.dtype(), seed++, 0.5, 1.5);
    p->value.copy_from(v);
    p->grad.zero();
  }
}

struct LayerErrors {
  double y = 0, dx = 0;
  std::vector<double> grads;  // per parameter
  bool spec_ok = true;        // output and input-gradient specs as promised
  double worst() const {
    double w = std::max(y, dx);
    for (double g : grads) w = std::max(w, g);
    return spec_ok ? w : 1e300;
  }
};

// Runs `steps` forward/backward pairs of a fresh layer from `make` on the full x over
// MPI_COMM_SELF and on x scattered by (dims, sizes) over `mesh`; returns the largest
// relative differences of the last step's y, dx and (accumulated) parameter gradients.
inline LayerErrors compare_with_single_rank(const Mesh& mesh, const LayerFactory& make,
                                            const Tensor& x, const std::vector<Placement>& dims,
                                            const std::vector<std::vector<Index>>& sizes = {},
                                            unsigned seed = 7, int steps = 1) {
  const Mesh self = Mesh::line(MPI_COMM_SELF);
  auto ref = make();
  auto sh = make();
  randomize_parameters(*ref, seed);
  randomize_parameters(*sh, seed);
  const ShardSpec in_spec(x.shape(), dims, mesh, {}, sizes);
  const ShardSpec ref_spec = ShardSpec::replicated(x.shape(), self);
  LayerErrors e;
  for (int step = 0; step < steps; ++step) {
    const ShardTensor xr = ShardTensor::scatter(self, x, ref_spec);
    const ShardTensor yr = ref->forward(xr);
    const Tensor dy = random_tensor(yr.global_shape(), x.dtype(), seed + 100 + step);
    const Tensor dxr = ref->backward(ShardTensor::scatter(self, dy, yr.spec())).gather_all();

    const ShardTensor xs = ShardTensor::scatter(mesh, x, in_spec);
    const ShardTensor ys = sh->forward(xs);
    e.spec_ok = ys.spec() == sh->output_spec(in_spec);
    const ShardTensor dxs = sh->backward(ShardTensor::scatter(mesh, dy, ys.spec()));
    e.spec_ok = e.spec_ok && dxs.spec() == in_spec;
    e.y = rel_error(ys.gather_all(), yr.gather_all());
    e.dx = rel_error(dxs.gather_all(), dxr);
  }
  sync_grads(mesh, sh->parameters());  // the steps' local contributions, summed once
  const auto pr = ref->parameters(), ps = sh->parameters();
  e.grads.clear();
  for (std::size_t i = 0; i < pr.size() && i < ps.size(); ++i)
    e.grads.push_back(rel_error(ps[i]->grad, pr[i]->grad));
  if (pr.size() != ps.size()) e.spec_ok = false;
  return e;
}

// Float64 central differences of L = <layer(x), w> against the layer's backward, at
// `samples` entries of x and of every parameter: the largest |fd - analytic| relative to
// the largest analytic gradient entry.
inline double finite_difference_error(const LayerFactory& make, const Tensor& x0, int samples = 24,
                                      double h = 1e-6, unsigned seed = 3) {
  const Mesh self = Mesh::line(MPI_COMM_SELF);
  auto l = make();
  randomize_parameters(*l, seed);
  const ShardSpec spec = ShardSpec::replicated(x0.shape(), self);
  const Tensor x = x0.clone();
  auto loss = [&](const Tensor& w) {
    const Tensor y = l->forward(ShardTensor::scatter(self, x, spec)).local();
    double s = 0;
    for (Index i = 0; i < y.numel(); ++i) s += y.data<double>()[i] * w.data<double>()[i];
    return s;
  };
  const ShardTensor y = l->forward(ShardTensor::scatter(self, x, spec));
  const Tensor w = random_tensor(y.global_shape(), DType::f64, seed + 1);
  const Tensor dx = l->backward(ShardTensor::scatter(self, w, y.spec())).local().clone();
  std::vector<Tensor> grads;
  for (Parameter* p : l->parameters()) grads.push_back(p->grad.clone());

  std::mt19937 rng(seed);
  double worst = 0, scale = 0;
  auto probe = [&](const Tensor& t, const Tensor& analytic) {
    for (Index i = 0; i < analytic.numel(); ++i)
      scale = std::max(scale, std::abs(analytic.data<double>()[i]));
    for (int k = 0; k < samples && t.numel() > 0; ++k) {
      const Index i = static_cast<Index>(rng() % static_cast<unsigned>(t.numel()));
      double& v = t.data<double>()[i];
      const double keep = v;
      v = keep + h;
      const double up = loss(w);
      v = keep - h;
      const double down = loss(w);
      v = keep;
      worst = std::max(worst, std::abs((up - down) / (2 * h) - analytic.data<double>()[i]));
    }
  };
  probe(x, dx);
  const auto ps = l->parameters();
  for (std::size_t j = 0; j < ps.size(); ++j) probe(ps[j]->value, grads[j]);
  return scale > 0 ? worst / scale : worst;
}

// Placements of an (N, C, spatial...) tensor of rank 2 + nspatial on `mesh`: an axis named
// "data" shards N; the others shard the spatial dims in order, and one left over shards C.
inline std::vector<Placement> layer_dims(const Mesh& mesh, int nspatial) {
  std::vector<Placement> dims(2 + nspatial, Replicate());
  int next = 0;
  for (int a = 0; a < mesh.ndim(); ++a) {
    if (mesh.names()[a] == "data")
      dims[0] = Shard(a);
    else if (next < nspatial)
      dims[2 + next++] = Shard(a);
    else if (!dims[1].sharded())
      dims[1] = Shard(a);
  }
  return dims;
}

// Explicit sizes of every sharded dim: random (uneven, empty shards allowed) when
// `uneven`, else empty (balanced).
inline std::vector<std::vector<Index>> layer_sizes(std::mt19937& rng, const Mesh& mesh,
                                                   const std::vector<Index>& shape,
                                                   const std::vector<Placement>& dims,
                                                   bool uneven) {
  std::vector<std::vector<Index>> sizes(shape.size());
  if (!uneven) return sizes;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!dims[d].sharded()) continue;
    const int parts = mesh.dim(dims[d].axis);
    std::vector<Index> s(parts, 0);
    for (Index c = 0; c < shape[d]; ++c) ++s[rng() % parts];
    sizes[d] = s;
  }
  return sizes;
}

// Sizes of `parts` shards cycling through 1, 0, 2 cells (thinner than most halos, empty
// ones included), the last shard taking the rest; and the extent they add up to.
inline std::vector<Index> thin_sizes(int parts, Index rest) {
  std::vector<Index> s(parts);
  const Index cycle[3] = {1, 0, 2};
  for (int i = 0; i < parts; ++i) s[i] = cycle[i % 3];
  s[parts - 1] += rest;
  return s;
}
inline Index total(const std::vector<Index>& s) {
  Index t = 0;
  for (Index v : s) t += v;
  return t;
}

// True when fn throws tessera::Error (on this rank).
template <class Fn>
bool throws_error(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
    return true;
  }
  return false;
}

}  // namespace tessera::test::ops
