#include "runtime/nn/op_cost.hpp"

#include <algorithm>

#include "decomp/halo_geometry.hpp"

namespace tessera {

OpCost& OpCost::operator+=(const OpCost& o) {
  flops += o.flops;
  bytes += o.bytes;
  saved_bytes += o.saved_bytes;
  scratch_bytes = std::max(scratch_bytes, o.scratch_bytes);
  host_scratch_bytes = std::max(host_scratch_bytes, o.host_scratch_bytes);
  halo_bytes += o.halo_bytes;
  halo_messages += o.halo_messages;
  halo_exchanges += o.halo_exchanges;
  ring_bytes += o.ring_bytes;
  ring_messages += o.ring_messages;
  alltoall_bytes += o.alltoall_bytes;
  alltoalls += o.alltoalls;
  allgather_bytes += o.allgather_bytes;
  allgathers += o.allgathers;
  reduce_scatter_bytes += o.reduce_scatter_bytes;
  reduce_scatters += o.reduce_scatters;
  allreduce_bytes += o.allreduce_bytes;
  allreduces += o.allreduces;
  whole_grad_elems += o.whole_grad_elems;
  return *this;
}

void OpCost::max_with(const OpCost& o) {
  flops = std::max(flops, o.flops);
  bytes = std::max(bytes, o.bytes);
  saved_bytes = std::max(saved_bytes, o.saved_bytes);
  scratch_bytes = std::max(scratch_bytes, o.scratch_bytes);
  host_scratch_bytes = std::max(host_scratch_bytes, o.host_scratch_bytes);
  halo_bytes = std::max(halo_bytes, o.halo_bytes);
  halo_messages = std::max(halo_messages, o.halo_messages);
  halo_exchanges = std::max(halo_exchanges, o.halo_exchanges);
  ring_bytes = std::max(ring_bytes, o.ring_bytes);
  ring_messages = std::max(ring_messages, o.ring_messages);
  alltoall_bytes = std::max(alltoall_bytes, o.alltoall_bytes);
  alltoalls = std::max(alltoalls, o.alltoalls);
  allgather_bytes = std::max(allgather_bytes, o.allgather_bytes);
  allgathers = std::max(allgathers, o.allgathers);
  reduce_scatter_bytes = std::max(reduce_scatter_bytes, o.reduce_scatter_bytes);
  reduce_scatters = std::max(reduce_scatters, o.reduce_scatters);
  allreduce_bytes = std::max(allreduce_bytes, o.allreduce_bytes);
  allreduces = std::max(allreduces, o.allreduces);
  whole_grad_elems = std::max(whole_grad_elems, o.whole_grad_elems);
}

std::vector<std::vector<int>> mesh_coords_of(const ShardSpec& spec) {
  const std::vector<int>& dims = spec.mesh_dims();
  std::vector<std::vector<int>> all;
  std::vector<int> c(dims.size(), 0);
  while (true) {
    all.push_back(c);
    int a = static_cast<int>(dims.size()) - 1;
    while (a >= 0 && ++c[static_cast<std::size_t>(a)] == dims[static_cast<std::size_t>(a)])
      c[static_cast<std::size_t>(a--)] = 0;
    if (a < 0) return all;
  }
}

double local_elems(const ShardSpec& spec, const std::vector<int>& coords) {
  return static_cast<double>(spec.local_box(coords).volume());
}

double busiest_elems(const ShardSpec& spec) {
  double most = 0;
  for (const auto& coords : mesh_coords_of(spec)) most = std::max(most, local_elems(spec, coords));
  return most;
}

OpCost elementwise_cost(const ShardSpec& out, std::size_t elem_size, double flops_per,
                        double passes) {
  return busiest(out, [&](const std::vector<int>& c) {
    OpCost o;
    const double y = local_elems(out, c);
    o.flops = flops_per * y;
    o.bytes = passes * y * static_cast<double>(elem_size);
    return o;
  });
}

int block_at(const ShardSpec& spec, const std::vector<int>& coords) {
  std::vector<int> bc(static_cast<std::size_t>(spec.ndim()), 0);
  for (int d = 0; d < spec.ndim(); ++d)
    if (spec.placement(d).sharded())
      bc[static_cast<std::size_t>(d)] = coords.at(static_cast<std::size_t>(spec.placement(d).axis));
  return spec.partition().id_of(bc);
}

OpCost window_halo_cost(const ShardSpec& haloed, const ShardSpec& driver,
                        const std::vector<HaloReach>& reach, std::size_t elem_size) {
  const WindowHalo wh(haloed.partition(), driver.partition(), reach);
  if (!wh.any_ghosts()) return {};
  const auto g = cached_halo_geometry(haloed.partition(), wh.widths(), wh.periodic());
  return busiest(haloed, [&](const std::vector<int>& coords) {
    OpCost c;
    const int b = block_at(haloed, coords);
    const HaloPlan& p = g->plan(b);
    Index cells = 0;
    for (const HaloSend& s : p.sends)
      if (s.peer != b) cells += s.src.volume(), ++c.halo_messages;
    for (const HaloRecv& r : p.recvs)
      if (r.peer != b) cells += r.dst.volume(), ++c.halo_messages;
    c.halo_bytes = cells * static_cast<std::int64_t>(elem_size);
    c.halo_exchanges = 2;
    return c;
  });
}

std::int64_t elements_sent(const ShardSpec& from, const ShardSpec& to,
                           const std::vector<int>& coords) {
  const Box mine = from.local_box(coords);
  std::int64_t n = 0;
  for (const auto& peer : mesh_coords_of(to))
    if (peer != coords) n += intersect(mine, to.local_box(peer)).volume();
  return n;
}

int ranks_over(const ShardSpec& spec, const std::vector<int>& axes) {
  int n = 1;
  for (int a : axes) n *= spec.mesh_dims().at(static_cast<std::size_t>(a));
  return n;
}

int reducing_axes(const ShardSpec& spec, const std::vector<int>& axes) {
  int n = 0;
  for (int a : axes)
    if (spec.mesh_dims().at(static_cast<std::size_t>(a)) > 1) ++n;
  return n;
}

}  // namespace tessera
