#pragma once
// GhostExchange: the points another rank's neighbourhood queries may need. Each rank owns the
// points in its region of a SpatialLayout; a point within r of another rank's region (squared
// distances compared, Region3::distance2_to) is that rank's ghost (however many regions r spans:
// regions are known everywhere, so no hops are needed). forward() copies owners' rows (coordinates,
// features, ids) to the ghost copies; adjoint() sums ghost rows (feature gradients) back into their
// owners - the same plan run backwards, as the grid halo's adjoint exchange.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <vector>

#include "runtime/points/spatial_layout.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

class GhostExchange {
 public:
  // Collective: owned (n, 3) float64 coordinates of this rank's points.
  GhostExchange(MPI_Comm comm, const SpatialLayout& layout, const Tensor& owned, double r);

  Index owned() const { return owned_; }
  double radius() const { return radius_; }
  int rank() const { return rank_; }  // in the exchange's communicator
  Index ghosts() const { return recv_total_; }
  // Rows of a per-owned-point host tensor (n, ...) -> rows of the ghosts (ghosts(), ...),
  // ordered by source rank, then by source row.
  Tensor forward(const Tensor& rows) const;
  // Rows of the ghosts (ghosts(), ...) summed into their owners: (n, ...), float32/float64.
  Tensor adjoint(const Tensor& ghost_rows) const;

 private:
  Tensor exchange(const Tensor& src, bool back) const;

  MPI_Comm comm_;
  double radius_ = 0;
  int rank_ = 0;
  Index owned_ = 0, recv_total_ = 0;
  std::vector<Index> send_rows_;  // owned rows, grouped by destination rank
  std::vector<Index> send_count_, recv_count_;
};

}  // namespace tessera
