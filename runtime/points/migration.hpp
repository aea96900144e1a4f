#pragma once
// Migration: moves the rows of per-point tensors to the ranks that should hold them (an
// all-to-all-v on a communicator), and back. The plan is made once from each local point's
// destination; any number of per-point tensors (coordinates, features, ids, gradients) then
// travel with it. Received rows are ordered by source rank, then by their order there, so
// the result does not depend on timing; reverse() puts rows back where forward() took them.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <string>
#include <vector>

#include "runtime/tensor/tensor.hpp"

namespace tessera {

// Collective over comm: one rank's bad rows (ok false, `why`), or rows of another element
// type or shape past the first dim than the other ranks' (the byte counts of an exchange of
// rows follow from them), fail every rank alike. Migration's and IndexGather's check.
void check_rows_collectively(MPI_Comm comm, bool ok, const std::string& why,
                             const std::string& call, const Tensor& rows);

class Migration {
 public:
  Migration() = default;
  // Collective: dest[i] is the rank (in comm) that local row i goes to.
  Migration(MPI_Comm comm, const std::vector<int>& dest);

  Index sent() const { return static_cast<Index>(dest_.size()); }
  Index received() const { return recv_total_; }
  // Rows (dim 0) of a host tensor of sent() rows to their destinations: received() rows.
  Tensor forward(const Tensor& rows) const;
  // The inverse: received() rows back to their sources, in their original order.
  Tensor reverse(const Tensor& rows) const;

 private:
  Tensor move(const Tensor& rows, bool back) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<int> dest_;
  std::vector<Index> order_;                    // local rows sorted by destination (stable)
  std::vector<Index> send_count_, recv_count_;  // rows per peer
  Index recv_total_ = 0;
};

}  // namespace tessera
