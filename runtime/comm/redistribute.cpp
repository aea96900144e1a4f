// ShardTensor::redistribute: any spec to any spec. Partial axes are resolved first
// (allreduce, or reduce-scatter when the target shards a dim over that axis); then a
// single-axis change takes its direct collective (allgatherv, local slice, all-to-all
// along the axis); anything else is one all-to-all over the mesh of box intersections.
#include <algorithm>
#include <climits>
#include <limits>
#include <deque>
#include <memory>

#include "runtime/tensor/context.hpp"
#include "kernels/region_pack.hpp"
#include "runtime/comm/alltoallv.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/message_plan.hpp"
#include "runtime/comm/mpi_datatype.hpp"
#include "runtime/comm/mpi_types.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {
namespace {

// Local index space of `box` (given in global coordinates) inside `owner` (a local box).
Box to_local(const Box& box, const Box& owner) {
  return relative_to(box, owner);
}

// In place (MPI's derived datatypes over the tensor) or packed; Auto: in place on host
// memory, packed (and staged where MPI cannot take device pointers) on the device.
bool use_derived_types(const Tensor& t, Transport m) {
  TESSERA_CHECK(
      m == Transport::Auto || m == Transport::InPlace || m == Transport::Packed,
      "redistribute: transport " << name_of(m) << " is not offered (auto, in-place or packed)");
  if (m == Transport::InPlace) {
    TESSERA_CHECK(t.space() == MemSpace::Host,
                  "redistribute: in-place (derived datatypes) is for host memory; use packed on "
                  "CUDA");
    return true;
  }
  return m == Transport::Auto && t.space() == MemSpace::Host;
}

// In place, each peer's message is one MPI message of one derived type over the local
// blocks: their extents must fit MPI's int, and (chosen automatically) no message may pass a
// piece (1 GiB, runtime/comm/message_pieces; some transports refuse longer single messages).
// Decided from the global specs, the same on every rank with no communication (the two
// paths are different collectives): per dim, a message is at most the smaller of the largest
// source and destination extents. Otherwise packed, cut where long.
Transport transport_for(const ShardSpec& src, const ShardSpec& dst, std::size_t es, Transport m) {
  if (m != Transport::Auto && m != Transport::InPlace) return m;  // (use_derived_types names it)
  bool extents_fit = true;
  double most = 1;
  for (int d = 0; d < src.ndim(); ++d) {
    const auto a = src.sizes(d), b = dst.sizes(d);
    const Index ea = *std::max_element(a.begin(), a.end()),
                eb = *std::max_element(b.begin(), b.end());
    extents_fit = extents_fit && ea <= INT_MAX && eb <= INT_MAX;
    most *= static_cast<double>(std::min(ea, eb));
  }
  if (m == Transport::InPlace) {
    TESSERA_CHECK(extents_fit,
                  "redistribute: in-place (derived datatypes) over blocks "
                  "with extents past MPI's int; use packed");
    return m;
  }
  const Index piece = piece_units_of(static_cast<Index>(es));
  return extents_fit && most <= static_cast<double>(piece) ? m : Transport::Packed;
}

// A redistribution's message plan (runtime/comm/message_plan.hpp) with its MPI types,
// kept for the next call with the same boxes: layers redistribute the same layouts every
// step. A bounded number of plans; the oldest goes first.
struct RedistPlan {
  std::vector<Box> send, recv;  // the key: boxes per peer and the two buffers' boxes
  Box src_box, dst_box;
  MessagePlan plan;
  std::size_t types_elem_size = 0;
  std::vector<MpiType> send_types, recv_types;  // per message, for types_elem_size
};
constexpr std::size_t kMaxRedistPlans = 64;

std::shared_ptr<RedistPlan> redist_plan(const std::vector<Box>& send, const std::vector<Box>& recv,
                                        const Box& src_box, const Box& dst_box) {
  static std::deque<std::shared_ptr<RedistPlan>> cache;
  for (const auto& c : cache)
    if (c->src_box == src_box && c->dst_box == dst_box && c->send == send && c->recv == recv)
      return c;
  auto p = std::make_shared<RedistPlan>();
  p->send = send;
  p->recv = recv;
  p->src_box = src_box;
  p->dst_box = dst_box;
  p->plan.send = message_side(send, src_box);
  p->plan.recv = message_side(recv, dst_box);
  if (cache.size() == kMaxRedistPlans) cache.pop_front();
  cache.push_back(p);
  return p;
}

// Moves boxes between the ranks of `comm`: this rank holds `src` (covering global box
// `src_box`) and sends send[q] to peer q; it receives recv[p] from peer p into a new
// tensor covering `dst_box`. Boxes are global; empty boxes move nothing. In place: MPI
// walks both tensors through the plan's derived types; packed: one pack kernel over every
// message, all-to-all-v, one unpack kernel.
Tensor exchange_boxes(MPI_Comm comm, const Tensor& src, const Box& src_box,
                      const std::vector<Box>& send, const std::vector<Box>& recv,
                      const Box& dst_box, Transport m) {
  const int P = static_cast<int>(send.size());
  const std::size_t es = src.elem_size();
  TESSERA_CHECK(src.is_contiguous(), "redistribute: internal error, a strided source");
  Tensor dst = Tensor::empty(dst_box.shape(), src.dtype(), src.space());
  const std::shared_ptr<RedistPlan> rp = redist_plan(send, recv, src_box, dst_box);
  const MessageSide& out = rp->plan.send;
  const MessageSide& in = rp->plan.recv;
  std::vector<Index> sc(P, 0), sd(P, 0), rc(P, 0), rd(P, 0);
  for (const PeerMessage& x : out.messages) sc[x.peer] = x.count, sd[x.peer] = x.offset;
  for (const PeerMessage& x : in.messages) rc[x.peer] = x.count, rd[x.peer] = x.offset;
  if (use_derived_types(src, m)) {
    if (rp->types_elem_size != es) {
      rp->send_types = out.types(es, std::numeric_limits<Index>::max());  // (transport_for)
      rp->recv_types = in.types(es, std::numeric_limits<Index>::max());
      rp->types_elem_size = es;
    }
    std::vector<MPI_Datatype> st(P, MPI_BYTE), rt(P, MPI_BYTE);
    std::vector<int> sn(P, 0), rn(P, 0), zd(P, 0);
    for (std::size_t i = 0; i < out.messages.size(); ++i) {
      st[out.messages[i].peer] = rp->send_types[i].get();
      sn[out.messages[i].peer] = 1;
    }
    for (std::size_t i = 0; i < in.messages.size(); ++i) {
      rt[in.messages[i].peer] = rp->recv_types[i].get();
      rn[in.messages[i].peer] = 1;
    }
    device::synchronize(src.device());  // MPI reads what kernels wrote
    TESSERA_MPI(MPI_Alltoallw(src.raw(), sn.data(), zd.data(), st.data(), dst.raw(), rn.data(),
                              zd.data(), rt.data(), comm));
    return dst;
  }
  Tensor sbuf = Tensor::empty({out.total()}, src.dtype(), src.space());
  Tensor rbuf = Tensor::empty({in.total()}, src.dtype(), src.space());
  if (!out.regions.empty())
    kernels::region_pack(src.device(), src.raw(), sbuf.raw(), out.regions.data(),
                         static_cast<int>(out.regions.size()), out.total(), es,
                         kernels::PackOp::Pack);
  const MemSpace wire = mpi_accepts(src.space()) ? src.space() : MemSpace::Host;
  Tensor ws = sbuf.in_space(wire),
         wr = wire == rbuf.space() ? rbuf : Tensor::empty({in.total()}, src.dtype(), wire);
  MpiType et = element_type(es);
  device::synchronize(ws.device());  // MPI reads what the packing kernel wrote
  alltoallv(comm, ws.raw(), sc, sd, wr.raw(), rc, rd, et.get());
  if (wr.raw() != rbuf.raw()) rbuf.copy_from(wr);
  if (!in.regions.empty())
    kernels::region_pack(dst.device(), dst.raw(), rbuf.raw(), in.regions.data(),
                         static_cast<int>(in.regions.size()), in.total(), es,
                         kernels::PackOp::Unpack);
  return dst;
}

// Ranks p and q can pair as source and destination when they agree on every mesh axis
// over which the source is not sharded (replicas and Partial addends stay on their slice).
bool pairs(const ShardSpec& src, const std::vector<int>& p, const std::vector<int>& q) {
  for (std::size_t a = 0; a < p.size(); ++a)
    if (src.dim_on_axis(static_cast<int>(a)) < 0 && p[a] != q[a]) return false;
  return true;
}

ShardTensor general(const ShardTensor& t, const ShardSpec& target, Transport m) {
  const Mesh& mesh = t.mesh();
  const ShardSpec& src = t.spec();
  const auto& me = mesh.coords();
  const Box mine = src.local_box(me), want = target.local_box(me);
  std::vector<Box> send(mesh.size()), recv(mesh.size());
  for (int q = 0; q < mesh.size(); ++q) {
    const auto qc = mesh.coords_of(q);
    send[q] = pairs(src, me, qc)
                  ? intersect(mine, target.local_box(qc))
                  : Box::from_shape(std::vector<Index>(static_cast<std::size_t>(mine.ndim), 0));
    recv[q] = pairs(src, qc, me)
                  ? intersect(src.local_box(qc), want)
                  : Box::from_shape(std::vector<Index>(static_cast<std::size_t>(mine.ndim), 0));
  }
  Tensor out = exchange_boxes(mesh.comm(), t.local(), mine, send, recv, want,
                              transport_for(src, target, t.local().elem_size(), m));
  return ShardTensor::unchecked(mesh, target, out);
}

// All-to-all along one mesh axis (Shard(i) -> Shard(j) over the same axis).
ShardTensor axis_alltoall(const ShardTensor& t, int axis, const ShardSpec& target, Transport m) {
  const Mesh& mesh = t.mesh();
  const int n = mesh.dim(axis);
  std::vector<int> c = mesh.coords();
  const Box mine = t.spec().local_box(c), want = target.local_box(c);
  std::vector<Box> send(n), recv(n);
  for (int k = 0; k < n; ++k) {
    c[axis] = k;
    send[k] = intersect(mine, target.local_box(c));
    recv[k] = intersect(t.spec().local_box(c), want);
  }
  Tensor out = exchange_boxes(mesh.axis_comm(axis), t.local(), mine, send, recv, want,
                              transport_for(t.spec(), target, t.local().elem_size(), m));
  return ShardTensor::unchecked(mesh, target, out);
}

// Shard(axis) of dim d -> Replicate, by allgatherv along the axis.
ShardTensor axis_allgather(const ShardTensor& t, int axis, int d, const ShardSpec& target) {
  const Mesh& mesh = t.mesh();
  const int n = mesh.dim(axis);
  const Tensor& src = t.local();
  std::vector<int> c = mesh.coords();
  const Box want = target.local_box(c);
  std::vector<Index> counts(n), displs(n);
  std::vector<Box> blocks(n);
  Index tot = 0;
  for (int k = 0; k < n; ++k) {
    c[axis] = k;
    blocks[k] = t.spec().local_box(c);
    displs[k] = tot;
    counts[k] = blocks[k].volume();
    tot += blocks[k].volume();
  }
  Tensor out = Tensor::empty(want.shape(), src.dtype(), src.space());
  // Blocks are contiguous in the output when no dim before d has extent > 1.
  bool direct = true;
  for (int e = 0; e < d; ++e) direct = direct && want.extent(e) <= 1;
  const MemSpace wire = mpi_accepts(src.space()) ? src.space() : MemSpace::Host;
  Tensor recvbuf = direct && wire == src.space() ? out.reshape({out.numel()})
                                                 : Tensor::empty({tot}, src.dtype(), wire);
  const Tensor sendbuf = src.in_space(wire);
  MpiType et = element_type(src.elem_size());
  // MPI reads src and writes recvbuf on the device (CUDA-aware MPI): the kernels that wrote
  // src, and any still reading a recycled block now under recvbuf, must be done.
  device::synchronize(sendbuf.device());
  allgatherv(mesh.axis_comm(axis), sendbuf.raw(), src.numel(), recvbuf.raw(), counts, displs,
             et.get());
  if (recvbuf.raw() != out.raw()) {
    for (int k = 0; k < n; ++k) {
      if (blocks[k].empty()) continue;
      const Box lb = to_local(blocks[k], want);
      out.view(lb).copy_from(
          recvbuf.view(Box({displs[k]}, {displs[k] + counts[k]})).reshape(lb.shape()));
    }
  }
  return ShardTensor::unchecked(mesh, target, out);
}

// Replicate -> Shard: each rank keeps its part, no communication.
ShardTensor local_slice(const ShardTensor& t, const ShardSpec& target) {
  const Box mine = t.local_box(), want = target.local_box(t.mesh().coords());
  return ShardTensor::unchecked(t.mesh(), target, t.local().view(to_local(want, mine)).clone());
}

// Allreduce in pieces of at most 1 GiB (runtime/comm/message_pieces), within MPI's int counts.
void allreduce_sum(Tensor& t, MPI_Comm comm) {
  const MemSpace wire = mpi_accepts(t.space()) ? t.space() : MemSpace::Host;
  Tensor buf = t.in_space(wire);
  device::synchronize(buf.device());  // MPI reads what kernels wrote (a strided clone)
  const MPI_Datatype mt = mpi_reducible_type_of(t.dtype());
  const Index chunk = piece_units(mt, 4096);  // int counts; 4 KiB pieces under a test limit
  auto* p = static_cast<unsigned char*>(buf.raw());
  for (Index off = 0; off < buf.numel(); off += chunk) {
    const int n = static_cast<int>(std::min(chunk, buf.numel() - off));
    TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, p + off * buf.elem_size(), n, mt, MPI_SUM, comm));
  }
  if (buf.raw() != t.raw()) t.copy_from(buf);
}

ShardTensor partial_to_replicate(const ShardTensor& t, int axis) {
  Tensor out = t.local().clone();
  allreduce_sum(out, t.mesh().axis_comm(axis));
  return ShardTensor::unchecked(t.mesh(), t.spec().with_partial([&] {
    std::vector<int> p;
    for (int a : t.spec().partial_axes())
      if (a != axis) p.push_back(a);
    return p;
  }()),
                                out);
}

// Partial over `axis` -> Shard(axis) of dim d with `sizes`, by reduce-scatter.
ShardTensor partial_to_shard(const ShardTensor& t, int axis, int d,
                             const std::vector<Index>& sizes) {
  const Mesh& mesh = t.mesh();
  const ShardSpec target = t.spec().with_placement(d, Shard(axis), sizes);
  const int n = mesh.dim(axis);
  const Tensor& src = t.local();
  // MPI's reduce-scatter takes int counts (and sums them into int displacements): a block
  // past that is summed whole, in int-sized pieces, and sliced. The block's size is the same
  // on every rank of the axis, so all take the same path.
  if (src.numel() > mpi_count_limit()) return local_slice(partial_to_replicate(t, axis), target);
  const Box mine = t.local_box();
  std::vector<int> c = mesh.coords(), counts(n);
  Tensor packed = Tensor::empty({src.numel()}, src.dtype(), src.space());
  Index off = 0;
  for (int k = 0; k < n; ++k) {
    c[axis] = k;
    const Box b = target.local_box(c);
    counts[k] = static_cast<int>(b.volume());
    const Box lb = to_local(b, mine);
    if (b.volume() > 0)
      packed.view(Box({off}, {off + b.volume()})).reshape(lb.shape()).copy_from(src.view(lb));
    off += b.volume();
  }
  const MemSpace wire = mpi_accepts(src.space()) ? src.space() : MemSpace::Host;
  const Tensor ws = packed.in_space(wire);
  const Box want = target.local_box(mesh.coords());
  Tensor out = Tensor::empty(want.shape(), src.dtype(), wire);
  // MPI reads `packed` (filled by strided-copy kernels) and writes `out` on the device
  // (CUDA-aware MPI): the queued kernels must be done first.
  device::synchronize(ws.device());
  TESSERA_MPI(MPI_Reduce_scatter(ws.raw(), out.raw(), counts.data(),
                                 mpi_reducible_type_of(src.dtype()), MPI_SUM,
                                 mesh.axis_comm(axis)));
  return ShardTensor::unchecked(mesh, target, out.in_space(src.space()));
}

// Replicate over `axis` -> Partial: coordinate 0 keeps the value, the others hold zero.
ShardTensor replicate_to_partial(const ShardTensor& t, int axis) {
  Tensor out = t.local().clone();
  if (t.mesh().coords()[axis] != 0) out.zero();
  std::vector<int> p = t.spec().partial_axes();
  p.push_back(axis);
  return ShardTensor::unchecked(t.mesh(), t.spec().with_partial(p), out);
}

bool same_dim(const ShardSpec& a, const ShardSpec& b, int d) {
  return a.placement(d) == b.placement(d) && a.sizes(d) == b.sizes(d);
}

}  // namespace

ShardTensor ShardTensor::redistribute(const ShardSpec& target, Transport m) const {
  TESSERA_CHECK(mesh_.valid(),
                "ShardTensor::redistribute: the ShardTensor is empty (default-constructed)");
  if (has_room()) return without_room().redistribute(target, m);  // the engines want plain shards
  std::string why;
  if (target.global_shape() != global_shape())
    why = "target global shape " + shape_str(target.global_shape()) + " differs from " +
          shape_str(global_shape());
  else if (target.mesh_dims() != mesh_.dims())
    why = "target spec is for another mesh";
  // Every rank must ask for the same move: ranks passing different targets (or holding
  // different layouts or element types, or asking for other transports) would wait for
  // each other in different transfers.
  collective_check(
      mesh_.comm(), why.empty(), "redistribute: " + why, "redistribute",
      "the layouts, element type or transport",
      spec_.str() + " -> " + target.str() + " " + name_of(local_.dtype()) + " " + name_of(m));
  ShardTensor cur = *this;
  // 1. Pending sums the target does not keep.
  for (int a : spec_.partial_axes()) {
    if (target.is_partial(a)) continue;
    const int d = target.dim_on_axis(a);
    if (d >= 0 && !cur.spec().placement(d).sharded())
      cur = partial_to_shard(cur, a, d, target.sizes(d));
    else
      cur = partial_to_replicate(cur, a);
  }
  // 2. New pending sums (only over axes that shard nothing).
  for (int a : target.partial_axes()) {
    if (cur.spec().is_partial(a)) continue;
    const int d = cur.spec().dim_on_axis(a);  // a sharded dim is gathered first
    if (d >= 0) cur = axis_allgather(cur, a, d, cur.spec().with_placement(d, Replicate()));
    cur = replicate_to_partial(cur, a);
  }
  if (cur.spec() == target) return cur;
  // 3. Sharding: direct collectives for single-axis changes, else the general all-to-all.
  std::vector<int> diff;
  for (int d = 0; d < target.ndim(); ++d)
    if (!same_dim(cur.spec(), target, d)) diff.push_back(d);
  const ShardSpec& s = cur.spec();
  if (diff.size() == 1) {
    const int d = diff[0], sa = s.placement(d).axis, ta = target.placement(d).axis;
    if (sa >= 0 && ta < 0) return axis_allgather(cur, sa, d, target);
    if (sa < 0 && ta >= 0 && s.dim_on_axis(ta) < 0) return local_slice(cur, target);
    if (sa >= 0 && sa == ta) return axis_alltoall(cur, sa, target, m);  // re-balance
  }
  if (diff.size() == 2) {
    const int i = diff[0], j = diff[1];
    const int a = s.placement(i).sharded() ? s.placement(i).axis : s.placement(j).axis;
    const bool moves = a >= 0 && ((s.placement(i).axis == a && target.placement(j).axis == a &&
                                   !s.placement(j).sharded() && !target.placement(i).sharded()) ||
                                  (s.placement(j).axis == a && target.placement(i).axis == a &&
                                   !s.placement(i).sharded() && !target.placement(j).sharded()));
    if (moves) return axis_alltoall(cur, a, target, m);
  }
  return general(cur, target, m);
}

}  // namespace tessera
