#include "runtime/tensor/shard_spec.hpp"

#include <algorithm>
#include <sstream>

#include "runtime/comm/mpi_error.hpp"
#include "runtime/tensor/mesh.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

ShardSpec::ShardSpec(const std::vector<Index>& shape, const std::vector<Placement>& dims,
                     const std::vector<int>& mesh_dims, const std::vector<int>& partial_axes,
                     const std::vector<std::vector<Index>>& sizes)
    : shape_(shape), dims_(dims), mesh_dims_(mesh_dims), partial_(partial_axes) {
  const int nd = static_cast<int>(shape.size());
  const int na = static_cast<int>(mesh_dims.size());
  TESSERA_CHECK(nd >= 1, "ShardSpec: a sharded tensor needs at least one dim (reduce scalars)");
  TESSERA_CHECK(static_cast<int>(dims.size()) == nd,
                "ShardSpec: " << dims.size() << " placements for a tensor of rank " << nd);
  TESSERA_CHECK(sizes.empty() || static_cast<int>(sizes.size()) == nd,
                "ShardSpec: sizes given for " << sizes.size() << " dims, tensor has " << nd);
  std::vector<int> used(na, 0);
  for (int d = 0; d < nd; ++d) {
    const int a = dims[d].axis;
    TESSERA_CHECK(a >= -1 && a < na, "ShardSpec: dim " << d << " sharded over mesh axis " << a
                                                       << ", mesh has " << na << " axes");
    if (a >= 0) {
      TESSERA_CHECK(!used[a], "ShardSpec: mesh axis " << a << " shards two tensor dims");
      used[a] = 1;
    }
  }
  std::sort(partial_.begin(), partial_.end());
  partial_.erase(std::unique(partial_.begin(), partial_.end()), partial_.end());
  for (int a : partial_) {
    TESSERA_CHECK(a >= 0 && a < na, "ShardSpec: partial mesh axis " << a << " out of range");
    TESSERA_CHECK(!used[a], "ShardSpec: mesh axis " << a << " is both Partial and Shard");
  }
  std::vector<std::vector<Index>> part_sizes(nd);
  for (int d = 0; d < nd; ++d) {
    const int a = dims[d].axis;
    const int parts = a >= 0 ? mesh_dims[a] : 1;
    if (!sizes.empty() && !sizes[d].empty()) {
      TESSERA_CHECK(a >= 0 || sizes[d].size() == 1,
                    "ShardSpec: explicit sizes for replicated dim " << d);
      TESSERA_CHECK(static_cast<int>(sizes[d].size()) == parts,
                    "ShardSpec: dim " << d << " has " << sizes[d].size() << " sizes for " << parts
                                      << " shards");
      part_sizes[d] = sizes[d];
    } else {
      part_sizes[d] = balanced_sizes(shape[d], parts);
    }
  }
  partition_ = BlockPartition(Box::from_shape(shape), part_sizes);
}

ShardSpec::ShardSpec(const std::vector<Index>& shape, const std::vector<Placement>& dims,
                     const Mesh& mesh, const std::vector<int>& partial_axes,
                     const std::vector<std::vector<Index>>& sizes)
    : ShardSpec(shape, dims, mesh.dims(), partial_axes, sizes) {}

ShardSpec ShardSpec::replicated(const std::vector<Index>& shape, const Mesh& mesh) {
  return ShardSpec(shape, std::vector<Placement>(shape.size()), mesh);
}

bool ShardSpec::is_partial(int axis) const {
  return std::find(partial_.begin(), partial_.end(), axis) != partial_.end();
}

int ShardSpec::dim_on_axis(int axis) const {
  for (int d = 0; d < ndim(); ++d)
    if (dims_[d].axis == axis) return d;
  return -1;
}

Box ShardSpec::local_box(const std::vector<int>& mc) const {
  TESSERA_CHECK(mc.size() == mesh_dims_.size(), "ShardSpec::local_box: mesh coords of rank "
                                                    << mc.size() << ", mesh has "
                                                    << mesh_dims_.size() << " axes");
  std::vector<int> block(ndim(), 0);
  for (int d = 0; d < ndim(); ++d)
    if (dims_[d].sharded()) block[d] = mc[dims_[d].axis];
  return partition_.block(block);
}

ShardSpec ShardSpec::with_placement(int d, Placement p, const std::vector<Index>& sz) const {
  std::vector<Placement> dims = dims_;
  dims.at(static_cast<std::size_t>(d)) = p;
  std::vector<std::vector<Index>> sizes(ndim());
  for (int e = 0; e < ndim(); ++e)
    if (e != d && dims_[e].sharded()) sizes[e] = partition_.sizes(e);
  sizes[d] = sz;
  std::vector<int> partial;
  for (int a : partial_)
    if (a != p.axis) partial.push_back(a);
  return ShardSpec(shape_, dims, mesh_dims_, partial, sizes);
}

ShardSpec ShardSpec::with_partial(const std::vector<int>& partial_axes) const {
  std::vector<std::vector<Index>> sizes(ndim());
  for (int e = 0; e < ndim(); ++e)
    if (dims_[e].sharded()) sizes[e] = partition_.sizes(e);
  return ShardSpec(shape_, dims_, mesh_dims_, partial_axes, sizes);
}

bool ShardSpec::operator==(const ShardSpec& o) const {
  return shape_ == o.shape_ && dims_ == o.dims_ && mesh_dims_ == o.mesh_dims_ &&
         partial_ == o.partial_ && partition_ == o.partition_;
}

std::string ShardSpec::str() const {
  std::ostringstream os;
  os << '[';
  for (int d = 0; d < ndim(); ++d) {
    os << (d ? ", " : "");
    if (dims_[d].sharded()) {
      os << "S(" << dims_[d].axis << ')';
      // Uneven sizes other than the balanced split are part of the layout: shown.
      const std::vector<Index> s = sizes(d);
      if (s != balanced_sizes(shape_[d], static_cast<int>(s.size()))) {
        os << '{';
        for (std::size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
        os << '}';
      }
    } else
      os << 'R';
  }
  os << ']';
  if (!partial_.empty()) {
    os << " partial{";
    for (std::size_t i = 0; i < partial_.size(); ++i) os << (i ? "," : "") << partial_[i];
    os << '}';
  }
  os << " global " << shape_str(shape_);
  return os.str();
}

}  // namespace tessera
