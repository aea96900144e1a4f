#pragma once
// ShardTensor: this rank's piece of a global tensor, plus the ShardSpec and Mesh that
// say where every other piece lives. Local storage is contiguous row-major, unless the
// tensor carries ghost room (AMReX's nGrow): then local() is the interior view of a padded
// buffer whose ghost cells a consumer's halo exchange fills in place (no copy of the shard
// into a padded buffer). Only ops that say they take room are handed such tensors.
#include "runtime/floor.hpp"
#include <vector>

#include "runtime/comm/transport.hpp"
#include "runtime/tensor/mesh.hpp"
#include "runtime/tensor/shard_spec.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

class HaloWidths;

class ShardTensor {
 public:
  ShardTensor() = default;
  // Collective: checks on every rank that `local` has the shape the spec gives it.
  ShardTensor(const Mesh& mesh, const ShardSpec& spec, const Tensor& local);

  // From each rank's local piece. Sizes of sharded dims are inferred with one
  // allgather when `sizes` is empty; inconsistent pieces throw on every rank.
  static ShardTensor from_local(const Mesh& mesh, const Tensor& local,
                                const std::vector<Placement>& dims,
                                const std::vector<int>& partial_axes = {},
                                const std::vector<std::vector<Index>>& sizes = {});
  // Splits `full` (significant on mesh rank `root` only) by `spec`, or by balanced
  // `dims`. Root's dtype and shape are broadcast; a shape mismatch throws everywhere.
  static ShardTensor scatter(const Mesh& mesh, const Tensor& full, const ShardSpec& spec,
                             int root = 0);
  static ShardTensor scatter(const Mesh& mesh, const Tensor& full,
                             const std::vector<Placement>& dims, int root = 0);

  // The global tensor on mesh rank `root` (Partial axes summed first); an undefined
  // Tensor elsewhere.
  Tensor gather(int root = 0) const;
  // The global tensor on every rank.
  Tensor gather_all() const;

  ShardTensor redistribute(const ShardSpec& target, Transport m = Transport::Auto) const;
  // Balanced sizes on newly sharded dims.
  ShardTensor redistribute(const std::vector<Placement>& dims,
                           const std::vector<int>& partial_axes = {},
                           Transport m = Transport::Auto) const;

  const Mesh& mesh() const { return mesh_; }
  const ShardSpec& spec() const { return spec_; }
  const Tensor& local() const { return local_; }
  const std::vector<Index>& global_shape() const { return spec_.global_shape(); }
  Box local_box() const { return spec_.local_box(mesh_.coords()); }
  DType dtype() const { return local_.dtype(); }

  // For the runtime's own results, whose shapes are right by construction.
  static ShardTensor unchecked(const Mesh& mesh, const ShardSpec& spec, const Tensor& local);

  // Ghost room: a shard living inside `padded`, a contiguous buffer over the global box
  // `padded_box` that contains this rank's local box; local() is the interior view.
  static ShardTensor in_room(const Mesh& mesh, const ShardSpec& spec, const Tensor& padded,
                             const Box& padded_box);
  // A shard with `left`/`right` cells of room per dim around this rank's box: ghost slabs
  // zeroed, the interior left for its producer to write.
  static ShardTensor with_room(const Mesh& mesh, const ShardSpec& spec,
                               const std::vector<Index>& left, const std::vector<Index>& right,
                               DType dtype, MemSpace space);
  // The same with this rank's widths of `widths` (per block, as halo plans give them).
  static ShardTensor with_room(const Mesh& mesh, const ShardSpec& spec, const HaloWidths& widths,
                               DType dtype, MemSpace space);
  bool has_room() const { return room_.defined(); }
  const Tensor& room() const { return room_; }       // the padded buffer (undefined: none)
  const Box& room_box() const { return room_box_; }  // its global box
  // The same values without room (a contiguous copy only where there is room).
  ShardTensor without_room() const;

 private:
  Mesh mesh_;
  ShardSpec spec_;
  Tensor local_;
  Tensor room_;
  Box room_box_;
};

}  // namespace tessera
