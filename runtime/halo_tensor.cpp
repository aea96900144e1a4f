#include "runtime/halo_tensor.hpp"

#include "decomp/halo_geometry.hpp"

namespace tessera {

HaloTensor::HaloTensor(const Mesh& mesh, const ShardSpec& spec, const std::vector<Index>& left,
                       const std::vector<Index>& right, DType dtype, MemSpace space)
    : mesh_(mesh), spec_(spec), left_(left), right_(right) {
  HaloWidths(left, right).validate(spec.ndim(), 1);  // the geometry's own width checks
  TESSERA_CHECK(!spec.has_partial(), "HaloTensor: resolve Partial axes before a halo exchange");
  interior_ = spec.local_box(mesh.coords());
  // As in the halo geometry, an empty shard still has ghosts around its position.
  padded_box_ = grow(interior_, left, right);
  padded_ = Tensor::zeros(padded_box_.shape(), dtype, space);
}

HaloTensor HaloTensor::from_shard(const ShardTensor& t, const std::vector<Index>& left,
                                  const std::vector<Index>& right) {
  HaloTensor h(t.mesh(), t.spec(), left, right, t.dtype(), t.local().space());
  h.interior().copy_from(t.local());
  return h;
}

Tensor HaloTensor::view_global(const Box& g) const {
  std::vector<Index> neg(g.ndim);
  for (int d = 0; d < g.ndim; ++d) neg[d] = -padded_box_.lo[d];
  return padded_.view(shift(g, neg));
}

Tensor HaloTensor::interior() const {
  return view_global(interior_);
}

ShardTensor HaloTensor::to_shard() const {
  return ShardTensor::unchecked(mesh_, spec_, interior().clone());
}

}  // namespace tessera
