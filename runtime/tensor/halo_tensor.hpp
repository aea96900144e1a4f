#pragma once
// HaloTensor: a rank's shard stored with its ghost cells in one buffer. The owned
// (interior) box sits inside the padded box, grown by per-dim left/right widths, so a
// halo exchange fills ghosts in place and stencil layers read the padded buffer as is.
#include "runtime/floor.hpp"
#include <vector>

#include "decomp/halo_geometry.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {

// The block id (in spec's partition) of the shard this rank holds.
int block_of(const Mesh& mesh, const ShardSpec& spec);

class HaloTensor {
 public:
  HaloTensor() = default;
  // A zeroed padded buffer for spec's local shard on this rank.
  HaloTensor(const Mesh& mesh, const ShardSpec& spec, const std::vector<Index>& left,
             const std::vector<Index>& right, DType dtype, MemSpace space = MemSpace::Host);
  // Widths per block (HaloWidths::per_block), as layers whose halo differs per rank need;
  // this rank's padded buffer uses its own block's widths.
  HaloTensor(const Mesh& mesh, const ShardSpec& spec, const HaloWidths& widths, DType dtype,
             MemSpace space = MemSpace::Host);
  // The shard's values copied into the interior; ghosts zero (only the ghost slabs are
  // written besides the copy: no pass over the whole buffer).
  static HaloTensor from_shard(const ShardTensor& t, const std::vector<Index>& left,
                               const std::vector<Index>& right);
  static HaloTensor from_shard(const ShardTensor& t, const HaloWidths& widths);
  // For an exchange that follows: the shard's own ghost room when it has exactly this rank's
  // widths (no copy; the exchange writes every ghost, from its owner or zero past an open
  // edge, so they are left as they are), else from_shard.
  static HaloTensor over(const ShardTensor& t, const HaloWidths& widths);
  // A padded buffer a kernel is about to overwrite in `written` (global): only the cells
  // outside it are zeroed (an adjoint frame whose window the kernel fills entirely).
  static HaloTensor for_overwrite(const Mesh& mesh, const ShardSpec& spec, const HaloWidths& widths,
                                  DType dtype, MemSpace space, const Box& written);

  const Tensor& padded() const { return padded_; }
  Tensor interior() const;       // a view of the owned cells
  ShardTensor to_shard() const;  // a copy of the owned cells as a ShardTensor
  // The owned cells as a ShardTensor that keeps this buffer as its ghost room (no copy).
  ShardTensor as_shard() const;
  const Box& interior_box() const { return interior_; }  // global coordinates
  const Box& padded_box() const { return padded_box_; }  // global coordinates
  const std::vector<Index>& left() const { return left_; }
  const std::vector<Index>& right() const { return right_; }
  const HaloWidths& widths() const { return widths_; }  // of every block
  const Mesh& mesh() const { return mesh_; }
  const ShardSpec& spec() const { return spec_; }
  // The view of a global box inside the padded buffer.
  Tensor view_global(const Box& global) const;
  // Zeroes the ghost cells only (the slabs of the padded box outside the interior).
  void zero_ghosts() const;

 private:
  enum class Fill { Zero, GhostsZero, None };  // the whole buffer, the ghost slabs, nothing
  HaloTensor(const Mesh& mesh, const ShardSpec& spec, const HaloWidths& widths, DType dtype,
             MemSpace space, Fill fill, const Tensor* storage = nullptr);
  Mesh mesh_;
  ShardSpec spec_;
  HaloWidths widths_;
  std::vector<Index> left_, right_;  // this rank's
  Box interior_, padded_box_;
  Tensor padded_;
};

}  // namespace tessera
