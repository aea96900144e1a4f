#pragma once
// ShardSpec: how a global tensor is laid out over a mesh. Per tensor dim: Shard(axis)
// (split over that mesh axis) or Replicate; per mesh axis optionally Partial (every
// rank along it holds an addend of the true value). Shard sizes are balanced by
// default or given explicitly; uneven and empty shards are first class.
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "decomp/box.hpp"
#include "decomp/partition.hpp"

namespace tessera {

class Mesh;

struct Placement {
  int axis = -1;  // mesh axis sharding this dim, -1: replicated
  bool sharded() const { return axis >= 0; }
  bool operator==(const Placement& o) const { return axis == o.axis; }
};
inline Placement Shard(int mesh_axis) {
  return Placement{mesh_axis};
}
inline Placement Replicate() {
  return Placement{-1};
}

class ShardSpec {
 public:
  ShardSpec() = default;
  // sizes: empty, or one entry per tensor dim; an entry of a sharded dim is empty
  // (balanced) or the per-coordinate sizes along its mesh axis.
  ShardSpec(const std::vector<Index>& global_shape, const std::vector<Placement>& dims,
            const std::vector<int>& mesh_dims, const std::vector<int>& partial_axes = {},
            const std::vector<std::vector<Index>>& sizes = {});
  ShardSpec(const std::vector<Index>& global_shape, const std::vector<Placement>& dims,
            const Mesh& mesh, const std::vector<int>& partial_axes = {},
            const std::vector<std::vector<Index>>& sizes = {});
  static ShardSpec replicated(const std::vector<Index>& global_shape, const Mesh& mesh);

  int ndim() const { return static_cast<int>(shape_.size()); }
  const std::vector<Index>& global_shape() const { return shape_; }
  const std::vector<Placement>& placements() const { return dims_; }
  const Placement& placement(int d) const { return dims_.at(static_cast<std::size_t>(d)); }
  const std::vector<int>& mesh_dims() const { return mesh_dims_; }
  bool is_partial(int axis) const;
  const std::vector<int>& partial_axes() const { return partial_; }
  bool has_partial() const { return !partial_.empty(); }
  // Tensor dim sharded over mesh axis `axis`, or -1.
  int dim_on_axis(int axis) const;
  // Sizes of tensor dim d per coordinate of its mesh axis (one entry if replicated).
  std::vector<Index> sizes(int d) const { return partition_.sizes(d); }
  const BlockPartition& partition() const { return partition_; }

  // The global box a rank at `mesh_coords` holds, and its shape.
  Box local_box(const std::vector<int>& mesh_coords) const;
  std::vector<Index> local_shape(const std::vector<int>& mesh_coords) const {
    return local_box(mesh_coords).shape();
  }

  // New specs derived from this one (sizes of untouched dims kept).
  ShardSpec with_placement(int d, Placement p, const std::vector<Index>& sizes = {}) const;
  ShardSpec with_partial(const std::vector<int>& partial_axes) const;

  bool operator==(const ShardSpec& o) const;
  bool operator!=(const ShardSpec& o) const { return !(*this == o); }
  // "[S(0), R, R] partial{1} global (8, 4, 4)"; sizes other than the balanced split shown:
  // "[S(0){5,0,3}, R] global (8, 4)".
  std::string str() const;

 private:
  std::vector<Index> shape_;
  std::vector<Placement> dims_;
  std::vector<int> mesh_dims_;
  std::vector<int> partial_;
  BlockPartition partition_;
};

}  // namespace tessera
