#pragma once
// Checks of sharded layers against the same layer on one rank: scatter -> sharded layer ->
// gather equals the full tensor through a layer on a mesh over MPI_COMM_SELF, forward and
// the gradients of input and every parameter. Every rank builds the full tensors from the
// same seed, so each rank compares on its own and the verdict is collective.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/layer.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/random_tensor.hpp"

namespace tessera::test {

// max |a - b| / max |b| over host tensors of equal shape; infinity on a shape mismatch.
inline double rel_error(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape()) return INFINITY;
  const Tensor x = a.contiguous(), y = b.contiguous();
  double diff = 0, scale = 1e-300;
  for (Index i = 0; i < x.numel(); ++i) {
    diff = std::max(diff, std::fabs(value_at(x, i) - value_at(y, i)));
    scale = std::max(scale, std::fabs(value_at(y, i)));
  }
  return diff / scale;
}

inline Tensor host(const Tensor& t) {
  return t.space() == MemSpace::Host ? t : t.to(MemSpace::Host);
}

// (N, C, spatial...) with spatial dim i sharded over mesh axis i (a "data" axis shards the
// batch), balanced or with random uneven sizes (zeros included).
inline ShardSpec conv_spec(const Mesh& mesh, const std::vector<Index>& shape, std::mt19937& rng,
                           bool uneven) {
  const int nd = static_cast<int>(shape.size()) - 2;
  std::vector<Placement> dims(shape.size(), Replicate());
  std::vector<std::vector<Index>> sizes(shape.size());
  int spatial = 0;
  for (int a = 0; a < mesh.ndim(); ++a) {
    int d;
    if (mesh.names()[a] == "data")
      d = 0;
    else if (spatial < nd)
      d = 2 + spatial++;
    else
      continue;
    dims[d] = Shard(a);
    if (uneven) sizes[d] = random_sizes(rng, shape[d], mesh.dim(a));
  }
  return ShardSpec(shape, dims, mesh, {}, sizes);
}

// The meshes the sharded-layer tests run on: a line of every rank ("x"), and for an even
// count a 2-D spatial mesh ("x", "y"; 4 ranks and more) and a domain x data mesh.
inline std::vector<Mesh> spatial_meshes(MPI_Comm comm) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<Mesh> m;
  m.push_back(Mesh::line(comm, "x"));
  if (P >= 4 && P % 2 == 0) m.push_back(Mesh(comm, {P / 2, 2}, {"x", "y"}));
  if (P % 2 == 0) m.push_back(Mesh(comm, {P / 2, 2}, {"x", "data"}));
  return m;
}

// True when f throws tessera::Error whose message contains `needle`.
inline bool throws_with(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

struct LayerComparison {
  double y = 0, dx = 0;
  std::vector<double> params;  // one per parameter gradient
  bool spec_ok = false;        // the output spec is the one output_spec() promised
  double worst() const {
    double w = std::max(y, dx);
    for (double p : params) w = std::max(w, p);
    return spec_ok ? w : INFINITY;
  }
  std::string str() const {
    std::ostringstream os;
    os << "spec " << (spec_ok ? "ok" : "WRONG") << " y " << y << " dx " << dx << " params";
    for (double p : params) os << ' ' << p;
    return os.str();
  }
};

// make() builds the layer (both copies must start with the same parameters).
inline LayerComparison compare_with_one_rank(
    const Mesh& mesh, const ShardSpec& in_spec, const std::function<std::unique_ptr<Layer>()>& make,
    DType dt, MemSpace space, unsigned seed,
    const std::function<std::unique_ptr<Layer>()>& make_serial = nullptr,
    MemSpace serial_space = MemSpace::Host) {
  const Tensor x_full = random_tensor(in_spec.global_shape(), dt, seed);
  // One rank: the full tensor on a mesh over MPI_COMM_SELF.
  const Mesh self(MPI_COMM_SELF, {1}, {"self"});
  // By default the one-rank layer runs in the same memory space as the sharded one; a
  // make_serial puts it elsewhere (device layers against the host).
  auto serial = make_serial ? make_serial() : make();
  const MemSpace ss = make_serial ? serial_space : space;
  const ShardSpec full_spec = ShardSpec::replicated(in_spec.global_shape(), self);
  const ShardTensor xs(self, full_spec, x_full.to(ss));
  const ShardTensor ys = serial->forward(xs);
  const Tensor dy_full = random_tensor(ys.global_shape(), dt, seed + 1);
  const ShardTensor dxs = serial->backward(ShardTensor(self, ys.spec(), dy_full.to(ss)));

  auto sharded = make();
  const ShardTensor xp = ShardTensor::scatter(mesh, x_full.to(space), in_spec);
  const ShardTensor yp = sharded->forward(xp);
  LayerComparison c;
  c.spec_ok = yp.spec() == sharded->output_spec(in_spec) &&
              yp.local().shape() == yp.spec().local_shape(mesh.coords());
  c.y = rel_error(host(yp.gather_all()), host(ys.local()));
  const ShardTensor dyp = ShardTensor::scatter(mesh, dy_full.to(space), yp.spec());
  const ShardTensor dxp = sharded->backward(dyp);
  sync_grads(mesh, sharded->parameters());
  c.spec_ok = c.spec_ok && dxp.spec() == in_spec;
  c.dx = rel_error(host(dxp.gather_all()), host(dxs.local()));
  const auto ps = serial->parameters(), pp = sharded->parameters();
  for (std::size_t i = 0; i < ps.size(); ++i)  // sharded parameters' blocks gathered whole
    c.params.push_back(rel_error(gather_global(*pp[i], pp[i]->grad), host(ps[i]->grad)));
  return c;
}

// Float64 central-difference check of every gradient of a layer on one rank, on the loss
// L = <layer(x), r> for a fixed random r: `probes` random entries of x and of each parameter.
// Returns the worst relative error (against the largest gradient entry). The default step
// suits layers linear in each argument (central differences exact); a nonlinear layer passes
// a small h.
inline double finite_difference_error(Layer& layer, const ShardTensor& x, int probes, unsigned seed,
                                      double h = 1e-3) {
  const Mesh& mesh = x.mesh();
  for (Parameter* p : layer.parameters()) p->grad.zero();
  const ShardTensor y = layer.forward(x);
  const Tensor r = random_tensor(y.local().shape(), DType::f64, seed + 7);
  const Tensor dx = layer.backward(ShardTensor(mesh, y.spec(), r)).local();
  auto loss = [&](const ShardTensor& in) {
    const Tensor yy = layer.forward(in).local();
    double s = 0;
    for (Index i = 0; i < yy.numel(); ++i) s += yy.data<double>()[i] * r.data<double>()[i];
    return s;
  };
  std::mt19937 rng(seed);
  double worst = 0;
  auto probe = [&](const Tensor& value, const Tensor& grad, const std::function<double()>& f) {
    double scale = 1e-300;
    for (Index i = 0; i < grad.numel(); ++i)
      scale = std::max(scale, std::fabs(grad.data<double>()[i]));
    for (int k = 0; k < probes; ++k) {
      const Index i = static_cast<Index>(rng() % static_cast<unsigned>(value.numel()));
      double& v = value.data<double>()[i];
      const double v0 = v;
      v = v0 + h;
      const double lp = f();
      v = v0 - h;
      const double lm = f();
      v = v0;
      worst = std::max(worst, std::fabs((lp - lm) / (2 * h) - grad.data<double>()[i]) / scale);
    }
  };
  const Tensor xv = x.local();
  probe(xv, dx, [&] { return loss(x); });
  for (Parameter* p : layer.parameters()) {
    const Tensor g = p->grad.clone();
    probe(p->value, g, [&] { return loss(x); });
  }
  return worst;
}

}  // namespace tessera::test
