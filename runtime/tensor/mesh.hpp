#pragma once
// Mesh: an N-d Cartesian grid of ranks with named axes (e.g. "domain", "data") and a
// sub-communicator per axis. Ranks are laid out row-major over the axes (the last
// axis varies fastest), and an axis communicator's rank equals the coordinate on it.
// Copies share the communicators.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "decomp/box.hpp"

namespace tessera {

class Mesh {
 public:
  Mesh() = default;
  // Collective over comm. The product of dims must equal the size of comm.
  Mesh(MPI_Comm comm, const std::vector<int>& dims, const std::vector<std::string>& names = {});
  // A 1-D mesh over all of comm.
  static Mesh line(MPI_Comm comm, const std::string& name = "domain");
  // A mesh over comm, one axis per spatial dim of a grid of `spatial_shape`, whose shape
  // minimizes the memory traffic of its halo exchange (min_halo_traffic_grid).
  static Mesh for_grid(MPI_Comm comm, const std::vector<Index>& spatial_shape,
                       const std::vector<std::string>& names = {});
  // Parses "domain=4,data=2" (a size "auto" lets one axis absorb the rest).
  static Mesh parse(MPI_Comm comm, const std::string& spec);

  bool valid() const { return impl_ != nullptr; }
  int ndim() const;
  const std::vector<int>& dims() const;
  int dim(int axis) const { return dims().at(static_cast<std::size_t>(axis)); }
  const std::vector<std::string>& names() const;
  int axis(const std::string& name) const;  // throws if unknown
  int size() const;
  int rank() const;
  const std::vector<int>& coords() const;  // of this rank
  std::vector<int> coords_of(int rank) const;
  int rank_of(const std::vector<int>& coords) const;

  MPI_Comm comm() const;
  // Ranks that differ only in `axis`; the communicator rank is the coordinate on it.
  MPI_Comm axis_comm(int axis) const;
  std::string str() const;  // "domain=4 x data=2"

 private:
  struct Impl;
  const Impl& impl() const;  // throws for a default-constructed Mesh
  std::shared_ptr<Impl> impl_;
};

}  // namespace tessera
