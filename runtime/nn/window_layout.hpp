#pragma once
// Runtime side of sliding-window layers (conv, transposed conv, pooling, upsampling): the
// output ShardSpec derived from the input's on every rank without communication, the
// halo'd buffer a local kernel reads or writes, and the mesh axes that shard the input
// (over which its parameters' gradients are partial).
#include "runtime/floor.hpp"
#include <functional>
#include <memory>
#include <vector>

#include "decomp/window_halo.hpp"
#include "runtime/comm/halo_exchange.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {

// The spec of a layer output of global shape out_shape: the input's placements, and along
// each sharded dim the sizes split_output gives (first_output_at[d] may be empty where the
// output keeps the input's extent and sizes, as batch dims do).
ShardSpec window_output_spec(const ShardSpec& in, const std::vector<Index>& out_shape,
                             OutputSplit split,
                             const std::vector<std::function<Index(Index)>>& first_output_at);

// The mesh axes that shard some dim of spec (its parameters' gradients are partial over them).
std::vector<int> sharding_axes(const ShardSpec& spec);

// The halo plan of one layer for one input spec: the window geometry of every block, this
// rank's block, and the exchange (absent when no block has ghosts). Collective to build.
struct WindowPlan {
  Mesh mesh;
  ShardSpec haloed_spec, driver_spec;  // the tensor carrying the halo, and the other one
  WindowHalo geometry;
  int block = 0;  // this rank's block id
  std::unique_ptr<HaloExchange> exchange;

  WindowPlan(const Mesh& mesh, const ShardSpec& haloed, const ShardSpec& driver,
             const std::vector<HaloReach>& reach);
  const BlockWindow& mine() const { return geometry.block(block); }
  bool matches(const Mesh& m, const ShardSpec& haloed) const {
    return m.comm() == mesh.comm() && haloed == haloed_spec;
  }
};

// A local buffer covering a global box of the haloed tensor: the padded buffer of a
// HaloTensor (when the plan exchanges) or a plain shard.
struct HaloFrame {
  HaloTensor halo;                         // set when the plan exchanges
  Tensor buffer;                           // the padded buffer, or the shard itself
  Box box;                                 // global box buffer covers
  Tensor window(const Box& global) const;  // a strided view of a global box inside buffer
  Tensor owned(const Box& global_owned) const { return window(global_owned); }
};

// The shard with its ghosts filled (forward exchange); no copy when no block has ghosts or
// when t's ghost room is the plan's (the exchange fills it in place).
HaloFrame fill_halo(const WindowPlan& plan, const ShardTensor& t);
// The ghost room a producer should leave around inputs of this plan (what fill_halo fills
// in place); empty widths when the plan exchanges nothing.
HaloWidths input_room(const WindowPlan& plan);
// A zeroed frame for accumulating into (the adjoint direction), of the haloed spec. Where a
// kernel overwrites `written` (global) entirely, only the cells outside it are zeroed.
HaloFrame zero_frame(const WindowPlan& plan, DType dtype, MemSpace space,
                     const Box* written = nullptr);
// Adds ghost values into their owners (adjoint exchange); no-op without ghosts.
void add_ghosts_to_owners(const WindowPlan& plan, const HaloFrame& f);
// The frame's owned cells as a ShardTensor of the haloed spec: a copy, or with keep_room the
// frame itself as the tensor's ghost room (no copy; local() is then a strided view).
ShardTensor owned_shard(const WindowPlan& plan, const HaloFrame& f, bool keep_room = false);

}  // namespace tessera
