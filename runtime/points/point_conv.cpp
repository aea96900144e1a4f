#include "runtime/points/point_conv.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <type_traits>

#include "kernels/edge_conv.hpp"
#include "kernels/strided_copy.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"
#include "runtime/points/migration.hpp"
#include "runtime/points/neighbor_query.hpp"
#include "decomp/hash.hpp"

namespace tessera {
namespace {

MPI_Comm token_comm(const Mesh& mesh, int axis) {
  return axis >= 0 ? mesh.axis_comm(axis) : MPI_COMM_SELF;
}

// Channels [c0, c0 + nc) of sample n of a (N, Cs, P) host tensor (float32 or float64), as
// float64 rows: dst[i * stride + c] for point i. One dtype dispatch per call, not per value.
void channel_rows(const Tensor& src, Index n, Index c0, Index nc, double* dst, Index stride) {
  const Index Cs = src.shape(1), P = src.shape(2);
  auto copy = [&](const auto* x) {
    for (Index c = 0; c < nc; ++c) {
      const auto* xc = x + (n * Cs + c0 + c) * P;
      for (Index i = 0; i < P; ++i) dst[i * stride + c] = static_cast<double>(xc[i]);
    }
  };
  if (src.dtype() == DType::f64)
    copy(src.data<double>());
  else
    copy(src.data<float>());
}

// Edges [f_j, x_j - x_i] of every point i's k neighbour slots (zeros for an empty slot, id
// < 0) from the gathered rows g (P k, E) and the points' own rows r (P, E), as T.
template <class T>
void assemble_edges(const double* g, const double* r, const std::int64_t* ids, Index P, Index k,
                    Index E, Index C, T* out) {
  for (Index i = 0; i < P; ++i)
    for (Index j = 0; j < k; ++j) {
      const Index e = (i * k + j) * E;
      if (ids[i * k + j] < 0) {
        std::fill(out + e, out + e + E, T(0));
        continue;
      }
      for (Index c = 0; c < C; ++c) out[e + c] = static_cast<T>(g[e + c]);
      for (Index c = C; c < E; ++c) out[e + c] = static_cast<T>(g[e + c] - r[i * E + c]);
    }
}

// Sample n's (P, O) rows <-> its channel-first (O, P) block at `offset` elements of an
// (N, O, P) tensor, on the device the buffers live on.
void transpose_into(const Device& dev, DType t, const void* src, void* dst, Index offset, Index P,
                    Index O, bool to_channels_first) {
  kernels::StridedCopy c;
  c.ndim = 2;
  c.shape[0] = P;
  c.shape[1] = O;
  const std::size_t es = size_of(t);
  const Index rows[2] = {O, 1}, cols[2] = {1, P};  // strides of (i, o) in each layout
  for (int d = 0; d < 2; ++d) {
    c.src_stride[d] = to_channels_first ? rows[d] : cols[d];
    c.dst_stride[d] = to_channels_first ? cols[d] : rows[d];
  }
  const auto* s = static_cast<const unsigned char*>(src);
  auto* o = static_cast<unsigned char*>(dst);
  if (to_channels_first)
    o += static_cast<std::size_t>(offset) * es;
  else
    s += static_cast<std::size_t>(offset) * es;
  kernels::strided_copy(dev, o, s, c, es);
}

// The columns of the neighbour lists: k, or the cloud's points where it has fewer.
Index neighbours_per_point(const std::vector<SampleNeighbours>& nb) {
  return nb.empty() ? 0 : nb.front().ids.shape(1);
}

}  // namespace

const std::vector<SampleNeighbours>& PointNeighbourhoods::get(const Mesh& mesh, int axis,
                                                              const std::vector<Index>& offsets,
                                                              const Tensor& pos, int pos_offset,
                                                              const NeighbourhoodOptions& o) {
  const MPI_Comm comm = token_comm(mesh, axis);
  std::uint64_t key = fnv1a(pos.raw(), static_cast<std::size_t>(pos.numel()) * pos.elem_size());
  key = fnv1a(offsets.data(), offsets.size() * sizeof(Index), key);
  key = fnv1a(&pos_offset, sizeof(pos_offset), key);
  // Every rank of the group must agree to reuse (else some would skip the collectives).
  int hit = have_ && key == key_ && opts_ == o ? 1 : 0;
  TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, &hit, 1, MPI_INT, MPI_MIN, comm));
  if (hit) return samples_;
  int me = 0;
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  const Index N = pos.shape(0), P = pos.shape(2), first = offsets[static_cast<std::size_t>(me)];
  // No more neighbours than the cloud has points: the rest would be empty slots, and the
  // edges (P x k x C) grow with k (k = 100000 on a cloud of 512 filled the node's memory).
  const Index k = std::min(o.neighbours, offsets.back());
  samples_.clear();
  for (Index n = 0; n < N; ++n) {
    Tensor xyz = Tensor::empty({P, 3}, DType::f64), ids = Tensor::empty({P}, DType::i64);
    channel_rows(pos, n, pos_offset, 3, xyz.data<double>(), 3);
    for (Index i = 0; i < P; ++i) ids.data<std::int64_t>()[i] = first + i;
    const SpatialLayout layout = SpatialLayout::rcb(comm, xyz);
    const Migration mig(comm, layout.owners(xyz));
    const Tensor owned = mig.forward(xyz), owned_ids = mig.forward(ids);
    const NeighborLists nb =
        o.radius > 0 ? ball_query(comm, layout, owned, owned_ids, xyz, o.radius, k, o.search)
                     : knn_query(comm, layout, owned, owned_ids, xyz, k, o.search);
    const std::int64_t* p = nb.ids.data<std::int64_t>();
    SampleNeighbours s;
    s.ids = nb.ids;
    s.gather = std::make_shared<IndexGather>(comm, offsets,
                                             std::vector<std::int64_t>(p, p + nb.ids.numel()));
    samples_.push_back(std::move(s));
  }
  key_ = key;
  opts_ = o;
  have_ = true;
  return samples_;
}

struct PointConv::Saved {
  Mesh mesh;
  ShardSpec in_spec, source_spec, out_spec;
  std::vector<SampleNeighbours> nb;
  struct Sample {     // in the layer's memory space
    Tensor edges, z;  // (P, k, C + 3), (P, k, C_out)
    Tensor ids;       // (P, k) int64 neighbour ids, -1: none
    Tensor argmax;    // (P, C_out) int64: the max's chosen neighbour
  };
  std::vector<Sample> samples;  // per local sample
};

PointConv::PointConv(const PointConvOptions& o) : opts_(o) {
  TESSERA_CHECK(o.in_channels >= 1 && o.out_channels >= 1,
                "PointConv: channels in " << o.in_channels << ", out " << o.out_channels);
  TESSERA_CHECK(o.neighbourhood.neighbours >= 1,
                "PointConv: neighbours = " << o.neighbourhood.neighbours << ", must be >= 1");
  TESSERA_CHECK(o.neighbourhood.radius >= 0 && std::isfinite(o.neighbourhood.radius),
                "PointConv: radius " << o.neighbourhood.radius);
  TESSERA_CHECK(o.pos_offset >= 0, "PointConv: pos_offset " << o.pos_offset);
  kernel_scalar(o.dtype, "PointConv");
  opts_.neighbourhood.search = o.space;
  if (!opts_.neighbourhoods) opts_.neighbourhoods = std::make_shared<PointNeighbourhoods>();
  const Index E = o.in_channels + 3;
  // Drawn on the host (the same values in every memory space), then moved.
  weight_ = make_param("weight", {o.out_channels, E}, 0.0, o.dtype, MemSpace::Host);
  bias_ = make_param("bias", {o.out_channels}, 0.0, o.dtype, MemSpace::Host);
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> u(-1.0 / std::sqrt(double(E)), 1.0 / std::sqrt(double(E)));
  for (Parameter* p : {&weight_, &bias_}) {
    for (Index i = 0; i < p->value.numel(); ++i) {
      if (o.dtype == DType::f64)
        p->value.data<double>()[i] = u(rng);
      else
        p->value.data<float>()[i] = static_cast<float>(u(rng));
    }
    p->value = p->value.in_space(o.space);
    p->grad = p->grad.in_space(o.space);
  }
}

PointConv::~PointConv() = default;

void PointConv::release_saved() {
  saved_.reset();
}

std::string PointConv::name() const {
  std::ostringstream os;
  os << "PointConv(" << opts_.in_channels << " -> " << opts_.out_channels << ", "
     << (opts_.neighbourhood.radius > 0
             ? "ball r=" + std::to_string(opts_.neighbourhood.radius) + " max "
             : std::string("knn k="))
     << opts_.neighbourhood.neighbours << ", " << (opts_.mean ? "mean" : "max") << ")";
  return os.str();
}

ShardSpec PointConv::output_spec(const std::vector<ShardSpec>& in) const {
  TESSERA_CHECK(in.size() == 2,
                name() << ": takes (features, source), got " << in.size() << " inputs");
  const ShardSpec &f = in[0], &s = in[1];
  for (const ShardSpec* sp : {&f, &s}) {
    TESSERA_CHECK(
        sp->ndim() == 3 && !sp->has_partial(),
        name() << ": inputs are (N, C, P) point tensors without Partial axes, got " << sp->str());
    TESSERA_CHECK(!sp->placement(1).sharded(),
                  name() << ": the channel dim is sharded (" << sp->str() << ")");
  }
  TESSERA_CHECK(f.global_shape()[1] == opts_.in_channels,
                name() << ": features have " << f.global_shape()[1] << " channels");
  TESSERA_CHECK(s.global_shape()[1] >= opts_.pos_offset + 3,
                name() << ": the source has " << s.global_shape()[1]
                       << " channels, coordinates are read from channels " << opts_.pos_offset
                       << ".." << opts_.pos_offset + 2);
  for (int d : {0, 2})
    TESSERA_CHECK(
        f.global_shape()[d] == s.global_shape()[d] && f.placement(d) == s.placement(d) &&
            f.sizes(d) == s.sizes(d),
        name() << ": features " << f.str() << " and source " << s.str() << " differ in dim " << d);
  return with_channels(f, opts_.out_channels);
}

ShardTensor PointConv::forward(const std::vector<ShardTensor>& in) {
  saved_.reset();  // a forward without backward (evaluation) leaves nothing behind
  const ShardSpec out_spec = output_spec({in.at(0).spec(), in.at(1).spec()});
  for (const ShardTensor& t : in) {
    check_layer_input(t, 3, 3, name());
    TESSERA_CHECK(t.local().space() == opts_.space,
                  name() << ": an input is in " << name_of(t.local().space())
                         << " memory, the layer's parameters in " << name_of(opts_.space));
  }
  TESSERA_CHECK(in[0].dtype() == opts_.dtype, name() << ": features are " << name_of(in[0].dtype())
                                                     << ", the layer " << name_of(opts_.dtype));
  auto s = std::make_unique<Saved>();
  s->mesh = in[0].mesh();
  s->in_spec = in[0].spec();
  s->source_spec = in[1].spec();
  s->out_spec = out_spec;
  const int axis = s->in_spec.placement(2).axis;
  std::vector<Index> offsets{0};
  for (Index n : s->in_spec.sizes(2)) offsets.push_back(offsets.back() + n);
  // The neighbourhoods, the gathers and the edges' assembly run on the host (the queries
  // and IndexGather are host code); the edge convolution runs where the layer lives.
  const Tensor f = in[0].local().in_space(MemSpace::Host).contiguous(),
               src = in[1].local().in_space(MemSpace::Host).contiguous();
  s->nb =
      opts_.neighbourhoods->get(s->mesh, axis, offsets, src, opts_.pos_offset, opts_.neighbourhood);
  const Index N = f.shape(0), C = f.shape(1), P = f.shape(2), k = neighbours_per_point(s->nb);
  const Index E = C + 3, O = opts_.out_channels;
  const DType t = opts_.dtype;
  const MemSpace space = opts_.space;
  const Device dev = Device::of(space);
  Tensor y = Tensor::empty({N, O, P}, t, space);
  const kernels::EdgeConvShape shape{P, k, E, O, opts_.mean, opts_.activation};
  for (Index n = 0; n < N; ++n) {
    // Each point's row [f_i, x_i], gathered for its neighbours: edges [f_j, x_j - x_i].
    Tensor rows = Tensor::empty({P, E}, DType::f64);
    double* r = rows.data<double>();
    channel_rows(f, n, 0, C, r, E);
    channel_rows(src, n, opts_.pos_offset, 3, r + C, E);
    const SampleNeighbours& nb = s->nb[static_cast<std::size_t>(n)];
    const Tensor g = nb.gather->forward(rows);
    const std::int64_t* ids = nb.ids.data<std::int64_t>();
    Tensor edges = Tensor::empty({P, k, E}, t);
    if (t == DType::f64)
      assemble_edges(g.data<double>(), r, ids, P, k, E, C, edges.data<double>());
    else
      assemble_edges(g.data<double>(), r, ids, P, k, E, C, edges.data<float>());
    Saved::Sample sm;
    sm.edges = edges.in_space(space);
    sm.ids = nb.ids.in_space(space);
    sm.z = Tensor::empty({P, k, O}, t, space);
    sm.argmax = Tensor::empty({P, O}, DType::i64, space);
    Tensor yn = Tensor::empty({P, O}, t, space);
    kernels::edge_conv_forward(dev, t, shape, sm.edges.raw(), sm.ids.data<std::int64_t>(),
                               weight_.value.raw(), bias_.value.raw(), sm.z.raw(), yn.raw(),
                               sm.argmax.data<std::int64_t>());
    // (P, O) rows -> channel-first (O, P) of sample n.
    transpose_into(dev, t, yn.raw(), y.raw(), n * O * P, P, O, /*to_channels_first=*/true);
    s->samples.push_back(std::move(sm));
  }
  const ShardTensor out = ShardTensor::unchecked(s->mesh, out_spec, y);
  saved_ = std::move(s);
  return out;
}

std::vector<ShardTensor> PointConv::backward(const ShardTensor& dy) {
  TESSERA_CHECK(saved_, name() << ": backward before forward");
  Saved& s = *saved_;
  check_output_grad(dy, s.out_spec, opts_.dtype, opts_.space, name());
  const Tensor g = dy.local().contiguous();
  const Index N = g.shape(0), O = g.shape(1), P = g.shape(2), k = neighbours_per_point(s.nb);
  const Index C = opts_.in_channels, E = C + 3;
  const DType t = opts_.dtype;
  const MemSpace space = opts_.space;
  const Device dev = Device::of(space);
  const kernels::EdgeConvShape shape{P, k, E, O, opts_.mean, opts_.activation};
  const Tensor dw = Tensor::zeros({O, E}, DType::f64, space),
               db = Tensor::zeros({O}, DType::f64, space);
  Tensor dx = Tensor::empty({N, C, P}, t);
  for (Index n = 0; n < N; ++n) {
    Tensor gn = Tensor::empty({P, O}, t, space);  // channel-first -> rows
    transpose_into(dev, t, g.raw(), gn.raw(), n * O * P, P, O, /*to_channels_first=*/false);
    const Saved::Sample& sm = s.samples[static_cast<std::size_t>(n)];
    Tensor dedges = Tensor::empty({P, k, E}, t, space);
    kernels::edge_conv_backward(dev, t, shape, sm.edges.raw(), sm.ids.data<std::int64_t>(),
                                weight_.value.raw(), sm.z.raw(), sm.argmax.data<std::int64_t>(),
                                gn.raw(), dedges.raw(), dw.data<double>(), db.data<double>());
    // The feature part of each edge's gradient goes home to f_j (the coordinates are data).
    const Tensor de = dedges.in_space(MemSpace::Host).contiguous();
    Tensor grows = Tensor::empty({P * k, C}, DType::f64);
    double* gr = grows.data<double>();
    auto feature_part = [&](const auto* d) {
      for (Index r = 0; r < P * k; ++r)
        for (Index c = 0; c < C; ++c) gr[r * C + c] = static_cast<double>(d[r * E + c]);
    };
    if (t == DType::f64)
      feature_part(de.data<double>());
    else
      feature_part(de.data<float>());
    const Tensor back = s.nb[static_cast<std::size_t>(n)].gather->adjoint(grows);  // (P, C)
    const double* bk = back.data<double>();
    auto channel_first = [&](auto* out) {  // (P, C) rows -> sample n's (C, P) block
      using T = std::remove_pointer_t<decltype(out)>;
      for (Index c = 0; c < C; ++c)
        for (Index i = 0; i < P; ++i) out[(n * C + c) * P + i] = static_cast<T>(bk[i * C + c]);
    };
    if (t == DType::f64)
      channel_first(dx.data<double>());
    else
      channel_first(dx.data<float>());
  }
  const std::vector<int> axes = sharding_axes(s.in_spec);
  add_param_grad(axes, dw, 0, weight_);
  add_param_grad(axes, db, 0, bias_);
  ShardTensor out = ShardTensor::unchecked(s.mesh, s.in_spec, dx.in_space(space));
  saved_.reset();  // what forward saved goes as soon as it has served
  return {out, ShardTensor()};
}

OpCost PointConv::cost(const std::vector<ShardSpec>& in, const ShardSpec& out, DType dtype) const {
  // Each point has min(k, the cloud's points) neighbours whatever the data (a ball query at
  // most that many): the edges' arithmetic and memory follow. Which neighbours live on
  // other ranks - the gathers' communication - depends on the points, and is left out.
  const Index k = std::min(opts_.neighbourhood.neighbours, in.at(0).global_shape()[2]);
  const auto E = static_cast<double>(opts_.in_channels + 3),
             O = static_cast<double>(opts_.out_channels);
  const auto es = static_cast<double>(size_of(dtype));
  return busiest(out, [&](const std::vector<int>& coords) {
    const Box b = out.local_box(coords);
    const auto samples = static_cast<double>(b.extent(0)),
               points = static_cast<double>(b.extent(2));
    const double edges = samples * points * static_cast<double>(k);
    OpCost o;
    o.flops = 3.0 * 2.0 * edges * E * O;  // forward's product, backward's two
    // Per sample: the edges, their pre-activations, the neighbour ids (the layers share the
    // neighbourhoods' storage: counted per layer, an upper bound), the max's choice.
    o.saved_bytes = edges * (E + O) * es + edges * 8.0 + samples * points * O * 8.0;
    o.bytes = 3.0 * edges * (E + O) * es;
    // One sample at a time: forward's rows and their gather in float64, and the kernel's
    // edge activations; backward's edge gradients, the kernel's two activation gradients,
    // and the features' part in float64 on its way home (and the adjoint's copy).
    const double kk = static_cast<double>(k), C = E - 3.0;
    o.scratch_bytes = std::max(points * E * 8.0 * (1.0 + kk) + points * kk * O * es,
                               points * kk * (E * es + 2.0 * O * es + 2.0 * C * 8.0));
    return o;
  });
}

}  // namespace tessera
