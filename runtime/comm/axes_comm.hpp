#pragma once
// AxesComm: the communicator of the ranks that differ only in a chosen set of mesh
// axes (all axes: the whole mesh; one axis: that axis' communicator; otherwise a
// Cartesian sub-communicator owned here). Gradient reductions and global losses use it.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <memory>
#include <vector>

#include "runtime/tensor/mesh.hpp"

namespace tessera {

class AxesComm {
 public:
  AxesComm() = default;
  // Collective over the mesh. Axes are sorted and deduplicated; empty: a group of one.
  AxesComm(const Mesh& mesh, std::vector<int> axes);

  MPI_Comm comm() const { return comm_; }
  const std::vector<int>& axes() const { return axes_; }
  int size() const { return size_; }

 private:
  struct Owned;
  std::shared_ptr<Owned> owned_;  // a communicator this object created, if any
  Mesh mesh_;                     // keeps borrowed communicators alive
  std::vector<int> axes_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 1;
};

}  // namespace tessera
