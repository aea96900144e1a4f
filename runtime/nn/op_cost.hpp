#pragma once
// OpCost: what one training step (forward + backward) of an op costs the busiest rank (each
// figure its own maximum over the ranks), computed from the specs alone - no data, no
// communication, no Mesh (a spec knows its mesh's shape), so tessera-train --dry-run asks it
// for any rank count from one process. Each op reports its figures from the same plans its
// forward makes (window halos, FFT stages, the attention algorithm it would choose); the dry
// run sums them over the graph. Communication is what a rank hands to MPI: bytes it sends
// to other ranks.
#include "runtime/floor.hpp"
#include <cstdint>
#include <vector>

#include "decomp/window_halo.hpp"
#include "runtime/tensor/shard_spec.hpp"

namespace tessera {

struct OpCost {
  double flops = 0, bytes = 0;    // local kernels: arithmetic and memory traffic
  double saved_bytes = 0;         // kept from forward until backward (besides the output)
  double scratch_bytes = 0;       // kernel scratch while the op runs (a peak: combined by max)
  double host_scratch_bytes = 0;  // scratch only its host path takes (a peak, as above)
  std::int64_t halo_bytes = 0;    // halo exchanges: forward sends plus the adjoint's returns
  int halo_messages = 0, halo_exchanges = 0;
  std::int64_t ring_bytes = 0;  // point-to-point ring hops (ring attention)
  int ring_messages = 0;
  std::int64_t alltoall_bytes = 0;  // all-to-all redistributions (FFT transposes, Ulysses)
  int alltoalls = 0;
  std::int64_t allgather_bytes = 0;  // all-gathers of blocks (this rank's block, once)
  int allgathers = 0;
  std::int64_t reduce_scatter_bytes = 0;  // reduce-scatters (the whole buffer a rank hands in)
  int reduce_scatters = 0;
  std::int64_t allreduce_bytes = 0;  // blocking all-reduces of activations (statistics, slices)
  int allreduces = 0;
  // Parameter elements whose gradients every rank computes whole (from replicated values), so
  // GradSync leaves them out of its all-reduce.
  std::int64_t whole_grad_elems = 0;

  OpCost& operator+=(const OpCost& o);  // one rank's costs of two parts
  void max_with(const OpCost& o);       // each figure the larger (the busiest rank's)
};

// Every coordinate of the spec's mesh, row-major.
std::vector<std::vector<int>> mesh_coords_of(const ShardSpec& spec);
// The field-wise maximum of f(coords) over every rank of spec's mesh.
template <class F>
OpCost busiest(const ShardSpec& spec, F f) {
  OpCost c;
  for (const auto& coords : mesh_coords_of(spec)) c.max_with(f(coords));
  return c;
}
// Elements of the block a rank at `coords` holds.
double local_elems(const ShardSpec& spec, const std::vector<int>& coords);
// Elements of the largest block any rank holds (the busiest rank's).
double busiest_elems(const ShardSpec& spec);

// Element-wise op: `flops_per` per output element, `passes` output-sized memory passes
// (forward and backward together) of `elem_size` bytes.
OpCost elementwise_cost(const ShardSpec& out, std::size_t elem_size, double flops_per,
                        double passes);

// The block id of the shard a rank at `coords` holds in spec's partition.
int block_at(const ShardSpec& spec, const std::vector<int>& coords);

// The halo a window layer plans (runtime/nn/window_layout.hpp's WindowPlan over the same
// reach): an exchange where any block has ghosts, forward in the forward pass and its
// adjoint in backward; the busiest rank's cells sent to other ranks both ways and messages.
OpCost window_halo_cost(const ShardSpec& haloed, const ShardSpec& driver,
                        const std::vector<HaloReach>& reach, std::size_t elem_size);

// Elements the rank at `coords` sends to other ranks when a tensor moves from `from` to `to`
// (the redistribute engine's all-to-all of box intersections; sources replicated over an axis
// are counted from every holder, an upper bound).
std::int64_t elements_sent(const ShardSpec& from, const ShardSpec& to,
                           const std::vector<int>& coords);
// Ranks along the mesh axes in `axes` (1 if none).
int ranks_over(const ShardSpec& spec, const std::vector<int>& axes);
// The axes in `axes` of more than one rank: the all-reduces allreduce_sum makes over them.
int reducing_axes(const ShardSpec& spec, const std::vector<int>& axes);

}  // namespace tessera
