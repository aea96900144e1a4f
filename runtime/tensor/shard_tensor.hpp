#pragma once
// ShardTensor: this rank's piece of a global tensor, plus the ShardSpec and Mesh that
// say where every other piece lives. Local storage is contiguous row-major; halo-padded
// storage for stencil layers lives in HaloTensor.
#include "runtime/floor.hpp"
#include <vector>

#include "runtime/comm/transport.hpp"
#include "runtime/tensor/mesh.hpp"
#include "runtime/tensor/shard_spec.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

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

 private:
  Mesh mesh_;
  ShardSpec spec_;
  Tensor local_;
};

}  // namespace tessera
