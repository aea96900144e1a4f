#include "runtime/tensor/halo_tensor.hpp"

#include "runtime/tensor/mesh.hpp"

namespace tessera {

int block_of(const Mesh& mesh, const ShardSpec& spec) {
  const auto& c = mesh.coords();
  std::vector<int> bc(spec.ndim(), 0);
  for (int d = 0; d < spec.ndim(); ++d)
    if (spec.placement(d).sharded()) bc[d] = c[spec.placement(d).axis];
  return spec.partition().id_of(bc);
}

HaloTensor::HaloTensor(const Mesh& mesh, const ShardSpec& spec, const std::vector<Index>& left,
                       const std::vector<Index>& right, DType dtype, MemSpace space)
    : HaloTensor(mesh, spec, HaloWidths(left, right), dtype, space) {}

HaloTensor::HaloTensor(const Mesh& mesh, const ShardSpec& spec, const HaloWidths& widths,
                       DType dtype, MemSpace space)
    : HaloTensor(mesh, spec, widths, dtype, space, Fill::Zero) {}

HaloTensor::HaloTensor(const Mesh& mesh, const ShardSpec& spec, const HaloWidths& widths,
                       DType dtype, MemSpace space, Fill fill, const Tensor* storage)
    : mesh_(mesh), spec_(spec), widths_(widths) {
  TESSERA_CHECK(!spec.has_partial(), "HaloTensor: resolve Partial axes before a halo exchange");
  widths.validate(spec.ndim(), spec.partition().num_blocks());  // the geometry's own checks
  const int block = block_of(mesh, spec);
  left_ = widths.left(block);
  right_ = widths.right(block);
  interior_ = spec.local_box(mesh.coords());
  // As in the halo geometry, an empty shard still has ghosts around its position.
  padded_box_ = grow(interior_, left_, right_);
  if (storage) {
    padded_ = *storage;  // a shard's ghost room (over checked its box)
    if (fill == Fill::GhostsZero) zero_ghosts();
  } else if (fill == Fill::Zero) {
    padded_ = Tensor::zeros(padded_box_.shape(), dtype, space);
  } else {
    padded_ = Tensor::empty(padded_box_.shape(), dtype, space);
    if (fill == Fill::GhostsZero) zero_ghosts();
  }
}

void HaloTensor::zero_ghosts() const {
  for (const Box& slab : outside_of(padded_box_, interior_)) view_global(slab).zero();
}

HaloTensor HaloTensor::from_shard(const ShardTensor& t, const HaloWidths& widths) {
  HaloTensor h(t.mesh(), t.spec(), widths, t.dtype(), t.local().space(), Fill::GhostsZero);
  h.interior().copy_from(t.local());
  return h;
}

namespace {
// Whether t's ghost room is exactly this rank's widths of `widths`.
bool room_fits(const ShardTensor& t, const HaloWidths& widths) {
  if (!t.has_room() || t.spec().has_partial()) return false;
  const int block = block_of(t.mesh(), t.spec());
  return t.room_box() == grow(t.local_box(), widths.left(block), widths.right(block));
}
}  // namespace

HaloTensor HaloTensor::over(const ShardTensor& t, const HaloWidths& widths) {
  if (!room_fits(t, widths)) return from_shard(t, widths);
  return HaloTensor(t.mesh(), t.spec(), widths, t.dtype(), t.local().space(), Fill::None,
                    &t.room());
}

HaloTensor HaloTensor::for_overwrite(const Mesh& mesh, const ShardSpec& spec,
                                     const HaloWidths& widths, DType dtype, MemSpace space,
                                     const Box& written) {
  HaloTensor h(mesh, spec, widths, dtype, space, Fill::None);
  const Box w = intersect(written, h.padded_box_);
  if (w.empty()) {
    h.padded_.zero();
    return h;
  }
  for (const Box& slab : outside_of(h.padded_box_, w)) h.view_global(slab).zero();
  return h;
}

HaloTensor HaloTensor::from_shard(const ShardTensor& t, const std::vector<Index>& left,
                                  const std::vector<Index>& right) {
  return from_shard(t, HaloWidths(left, right));
}

Tensor HaloTensor::view_global(const Box& g) const {
  return padded_.view(relative_to(g, padded_box_));
}

Tensor HaloTensor::interior() const {
  return view_global(interior_);
}

ShardTensor HaloTensor::to_shard() const {
  return ShardTensor::unchecked(mesh_, spec_, interior().clone());
}

ShardTensor HaloTensor::as_shard() const {
  return ShardTensor::in_room(mesh_, spec_, padded_, padded_box_);
}

}  // namespace tessera
