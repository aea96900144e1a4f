#include "runtime/tensor/shard_tensor.hpp"

#include <climits>

#include <algorithm>

#include "runtime/comm/collective_error.hpp"
#include "runtime/tensor/halo_tensor.hpp"
#include "runtime/comm/mpi_datatype.hpp"

namespace tessera {

ShardTensor ShardTensor::unchecked(const Mesh& mesh, const ShardSpec& spec, const Tensor& local) {
  ShardTensor t;
  t.mesh_ = mesh;
  t.spec_ = spec;
  t.local_ = local.contiguous();
  return t;
}

ShardTensor ShardTensor::in_room(const Mesh& mesh, const ShardSpec& spec, const Tensor& padded,
                                 const Box& padded_box) {
  const Box own = spec.local_box(mesh.coords());
  TESSERA_CHECK(
      padded.is_contiguous() && padded.shape() == padded_box.shape() && padded_box.contains(own),
      "ShardTensor::in_room: buffer " << shape_str(padded.shape()) << " over " << padded_box.str()
                                      << " does not hold the shard " << own.str());
  ShardTensor t;
  t.mesh_ = mesh;
  t.spec_ = spec;
  t.room_ = padded;
  t.room_box_ = padded_box;
  t.local_ = padded.view(relative_to(own, padded_box));
  return t;
}

ShardTensor ShardTensor::with_room(const Mesh& mesh, const ShardSpec& spec,
                                   const std::vector<Index>& left, const std::vector<Index>& right,
                                   DType dtype, MemSpace space) {
  const Box own = spec.local_box(mesh.coords());
  const Box pb = grow(own, left, right);
  const ShardTensor t = in_room(mesh, spec, Tensor::empty(pb.shape(), dtype, space), pb);
  for (const Box& slab : outside_of(pb, own)) t.room_.view(relative_to(slab, pb)).zero();
  return t;
}

ShardTensor ShardTensor::with_room(const Mesh& mesh, const ShardSpec& spec,
                                   const HaloWidths& widths, DType dtype, MemSpace space) {
  TESSERA_CHECK(!widths.empty(),
                "ShardTensor::with_room: no widths given (Graph::input_room gives none when "
                "the input's consumers disagree, one wants none or ghost room is off): write "
                "the plain shard instead");
  const int block = block_of(mesh, spec);
  return with_room(mesh, spec, widths.left(block), widths.right(block), dtype, space);
}

ShardTensor ShardTensor::without_room() const {
  return has_room() ? unchecked(mesh_, spec_, local_) : *this;
}

ShardTensor::ShardTensor(const Mesh& mesh, const ShardSpec& spec, const Tensor& local) {
  std::string why;
  if (spec.mesh_dims() != mesh.dims())
    why = "spec is for another mesh shape than " + mesh.str();
  else if (local.shape() != spec.local_shape(mesh.coords()))
    why = "local tensor " + shape_str(local.shape()) + " but spec " + spec.str() + " gives " +
          shape_str(spec.local_shape(mesh.coords()));
  collective_check(mesh.comm(), why.empty(), "ShardTensor: " + why, "ShardTensor",
                   "the spec or element type",
                   spec.str() + " " + (local.defined() ? name_of(local.dtype()) : "undefined"));
  *this = unchecked(mesh, spec, local);
}

ShardTensor ShardTensor::from_local(const Mesh& mesh, const Tensor& local,
                                    const std::vector<Placement>& dims,
                                    const std::vector<int>& partial_axes,
                                    const std::vector<std::vector<Index>>& sizes) {
  if (!sizes.empty()) {
    // Sizes given: the global shape follows without communication.
    std::vector<Index> global = local.shape();
    for (std::size_t d = 0; d < dims.size() && d < global.size(); ++d)
      if (dims[d].sharded() && d < sizes.size() && !sizes[d].empty()) {
        global[d] = 0;
        for (Index s : sizes[d]) global[d] += s;
      }
    std::string why;
    ShardSpec spec;
    try {
      spec = ShardSpec(global, dims, mesh, partial_axes, sizes);
    } catch (const Error& e) {
      why = e.what();
    }
    collective_check(mesh.comm(), why.empty(), "ShardTensor::from_local: " + why);
    return ShardTensor(mesh, spec, local);
  }
  // One allgather of (ndim, dtype, shape) from every rank; every rank then derives the
  // same sizes and the same verdict, so the checks below are collective by construction.
  constexpr int kRec = 2 + kMaxDims;
  std::vector<Index> mine(kRec, 0), all(static_cast<std::size_t>(kRec) * mesh.size());
  mine[0] = local.ndim();
  mine[1] = static_cast<Index>(local.dtype());
  for (int d = 0; d < local.ndim(); ++d) mine[2 + d] = local.shape()[d];
  TESSERA_MPI(
      MPI_Allgather(mine.data(), kRec, MPI_INT64_T, all.data(), kRec, MPI_INT64_T, mesh.comm()));
  auto rec = [&](int r) { return all.data() + static_cast<std::size_t>(r) * kRec; };
  const int nd = static_cast<int>(rec(0)[0]);
  for (int r = 0; r < mesh.size(); ++r) {
    TESSERA_CHECK(rec(r)[0] == nd, "ShardTensor::from_local: rank " << r << " has a tensor of rank "
                                                                    << rec(r)[0] << ", rank 0 of "
                                                                    << nd);
    TESSERA_CHECK(rec(r)[1] == rec(0)[1],
                  "ShardTensor::from_local: rank "
                      << r << " has dtype " << name_of(static_cast<DType>(rec(r)[1])) << ", rank 0 "
                      << name_of(static_cast<DType>(rec(0)[1])));
  }
  TESSERA_CHECK(
      static_cast<int>(dims.size()) == nd,
      "ShardTensor::from_local: " << dims.size() << " placements for rank-" << nd << " tensors");
  std::vector<std::vector<Index>> inferred(nd);
  std::vector<Index> global(nd);
  for (int d = 0; d < nd; ++d) {
    const int a = dims[d].axis;
    TESSERA_CHECK(a < mesh.ndim(), "ShardTensor::from_local: mesh axis " << a << " out of range");
    if (a >= 0) inferred[d].assign(mesh.dim(a), -1);
    for (int r = 0; r < mesh.size(); ++r) {
      const Index e = rec(r)[2 + d];
      Index& slot = a >= 0 ? inferred[d][mesh.coords_of(r)[a]] : global[d];
      if (r == 0 || (a >= 0 && slot < 0)) {
        slot = e;
      } else {
        TESSERA_CHECK(slot == e, "ShardTensor::from_local: dim " << d << " has extent " << e
                                                                 << " on rank " << r
                                                                 << ", other ranks with the same "
                                                                    "coordinate have "
                                                                 << slot);
      }
    }
    if (a >= 0) {
      global[d] = 0;
      for (Index s : inferred[d]) global[d] += s;
    }
  }
  ShardSpec spec(global, dims, mesh, partial_axes, inferred);
  return unchecked(mesh, spec, local);
}

namespace {
// The rank (in mesh.comm()) that owns `spec`'s piece for each rank's box without
// duplicates: coordinate 0 on every axis that shards nothing.
bool is_canonical_holder(const ShardSpec& spec, const std::vector<int>& coords) {
  for (std::size_t a = 0; a < coords.size(); ++a)
    if (spec.dim_on_axis(static_cast<int>(a)) < 0 && coords[a] != 0) return false;
  return true;
}

// The root walks the whole tensor through MPI subarray types, whose extents are ints: past
// that, every rank refuses (the spec is the same on all of them; the root alone failed
// before, while the others waited in the all-to-all).
void check_whole_extents(const ShardSpec& spec, const char* what) {
  for (Index e : spec.global_shape())
    TESSERA_CHECK(e <= INT_MAX, "ShardTensor::" << what << ": the whole tensor "
                                                << shape_str(spec.global_shape())
                                                << " has an extent past MPI's int");
}
}  // namespace

ShardTensor ShardTensor::scatter(const Mesh& mesh, const Tensor& full,
                                 const std::vector<Placement>& dims, int root) {
  collective_check(mesh.comm(), root >= 0 && root < mesh.size(),
                   "ShardTensor::scatter: root " + std::to_string(root) + " not in mesh",
                   "ShardTensor::scatter", "the root", std::to_string(root));
  // Non-roots learn the global shape from root first.
  constexpr int kRec = 2 + kMaxDims;
  std::vector<Index> hdr(kRec, 0);
  if (mesh.rank() == root) {
    hdr[0] = full.ndim();
    for (int d = 0; d < full.ndim(); ++d) hdr[2 + d] = full.shape()[d];
  }
  TESSERA_MPI(MPI_Bcast(hdr.data(), kRec, MPI_INT64_T, root, mesh.comm()));
  std::vector<Index> shape(hdr.begin() + 2, hdr.begin() + 2 + hdr[0]);
  std::string why;
  ShardSpec spec;
  try {
    spec = ShardSpec(shape, dims, mesh);
  } catch (const Error& e) {
    why = e.what();
  }
  collective_check(mesh.comm(), why.empty(), "ShardTensor::scatter: " + why);
  return scatter(mesh, full, spec, root);
}

ShardTensor ShardTensor::scatter(const Mesh& mesh, const Tensor& full, const ShardSpec& spec,
                                 int root) {
  const int me = mesh.rank(), P = mesh.size();
  // Root's dtype travels; root's shape must match the spec (checked on all ranks).
  std::int64_t hdr[2] = {0, 0};
  std::string why;
  if (root < 0 || root >= P) why = "root " + std::to_string(root) + " not in mesh";
  if (me == root) {
    hdr[0] = static_cast<std::int64_t>(full.dtype());
    if (!full.defined())
      why = "root passed an undefined tensor";
    else if (full.shape() != spec.global_shape())
      why = "root's tensor " + shape_str(full.shape()) + " does not match spec " + spec.str();
  }
  collective_check(mesh.comm(), why.empty(), "ShardTensor::scatter: " + why, "ShardTensor::scatter",
                   "the root or spec", "root " + std::to_string(root) + ", " + spec.str());
  TESSERA_CHECK(!spec.has_partial(), "ShardTensor::scatter: cannot scatter into a Partial spec");
  check_whole_extents(spec, "scatter");
  TESSERA_MPI(MPI_Bcast(hdr, 2, MPI_INT64_T, root, mesh.comm()));
  const DType dt = static_cast<DType>(hdr[0]);
  const std::size_t es = size_of(dt);

  const Tensor src = me == root ? full.in_space(MemSpace::Host).contiguous() : Tensor();
  Tensor local = Tensor::empty(spec.local_shape(mesh.coords()), dt, MemSpace::Host);
  std::vector<MpiType> stypes, rtypes;
  std::vector<MPI_Datatype> st(P, MPI_BYTE), rt(P, MPI_BYTE);
  std::vector<int> sc(P, 0), rc(P, 0), zd(P, 0);
  if (me == root) {
    for (int q = 0; q < P; ++q) {
      const Box b = spec.local_box(mesh.coords_of(q));
      if (b.empty()) continue;
      stypes.push_back(subarray_type(full.shape(), b, es));
      st[q] = stypes.back().get();
      sc[q] = 1;
    }
  }
  if (local.numel() > 0) {
    rtypes.push_back(subarray_type(local.shape(), Box::from_shape(local.shape()), es));
    rt[root] = rtypes.back().get();
    rc[root] = 1;
  }
  TESSERA_MPI(MPI_Alltoallw(src.raw(), sc.data(), zd.data(), st.data(), local.raw(), rc.data(),
                            zd.data(), rt.data(), mesh.comm()));
  if (full.defined() && full.space() == MemSpace::Cuda) local = local.to(MemSpace::Cuda);
  return unchecked(mesh, spec, local);
}

Tensor ShardTensor::gather(int root) const {
  TESSERA_CHECK(mesh_.valid(),
                "ShardTensor::gather: the ShardTensor is empty (default-constructed)");
  if (has_room()) return without_room().gather(root);
  if (spec_.has_partial()) return redistribute(spec_.with_partial({})).gather(root);
  const int me = mesh_.rank(), P = mesh_.size();
  collective_check(mesh_.comm(), root >= 0 && root < P,
                   "ShardTensor::gather: root " + std::to_string(root) + " not in mesh",
                   "ShardTensor::gather", "the root", std::to_string(root));
  check_whole_extents(spec_, "gather");
  const std::size_t es = local_.elem_size();
  const Tensor src = local_.in_space(MemSpace::Host).contiguous();
  Tensor full =
      me == root ? Tensor::empty(spec_.global_shape(), dtype(), MemSpace::Host) : Tensor();
  std::vector<MpiType> types;
  std::vector<MPI_Datatype> st(P, MPI_BYTE), rt(P, MPI_BYTE);
  std::vector<int> sc(P, 0), rc(P, 0), zd(P, 0);
  if (is_canonical_holder(spec_, mesh_.coords()) && src.numel() > 0) {
    types.push_back(subarray_type(src.shape(), Box::from_shape(src.shape()), es));
    st[root] = types.back().get();
    sc[root] = 1;
  }
  if (me == root) {
    for (int p = 0; p < P; ++p) {
      const auto c = mesh_.coords_of(p);
      const Box b = spec_.local_box(c);
      if (!is_canonical_holder(spec_, c) || b.empty()) continue;
      types.push_back(subarray_type(spec_.global_shape(), b, es));
      rt[p] = types.back().get();
      rc[p] = 1;
    }
  }
  TESSERA_MPI(MPI_Alltoallw(src.raw(), sc.data(), zd.data(), st.data(), full.raw(), rc.data(),
                            zd.data(), rt.data(), mesh_.comm()));
  if (me == root && local_.space() == MemSpace::Cuda) return full.to(MemSpace::Cuda);
  return full;
}

Tensor ShardTensor::gather_all() const {
  TESSERA_CHECK(mesh_.valid(),
                "ShardTensor::gather_all: the ShardTensor is empty (default-constructed)");
  return redistribute(ShardSpec::replicated(global_shape(), mesh_)).local();
}

ShardTensor ShardTensor::redistribute(const std::vector<Placement>& dims,
                                      const std::vector<int>& partial_axes, Transport m) const {
  return redistribute(ShardSpec(global_shape(), dims, mesh_, partial_axes), m);
}

}  // namespace tessera
