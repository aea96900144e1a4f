#pragma once
// All-to-all-v and all-gather-v with 64-bit counts and displacements. MPI's own take int
// counts, so a message or a buffer past 2^31 units (a rank's share of a large point cloud in
// bytes, a transpose buffer in elements) could not be described; the check failed on the ranks
// that held such a buffer only, and the others waited in the collective. Here every rank takes
// the same path: MPI's collective while every count and displacement of every rank fits an int
// (the common case, unchanged), point-to-point pieces of at most 1 GiB when one does not.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <vector>

#include "decomp/index.hpp"
#include "runtime/comm/message_pieces.hpp"  // mpi_count_limit

namespace tessera {

// Collective. send_counts[p] units of `type` from send + send_displs[p] units go to rank p;
// recv_counts[p] from rank p land at recv + recv_displs[p]. One all-reduce decides the path.
void alltoallv(MPI_Comm comm, const void* send, const std::vector<Index>& send_counts,
               const std::vector<Index>& send_displs, void* recv,
               const std::vector<Index>& recv_counts, const std::vector<Index>& recv_displs,
               MPI_Datatype type);

// Collective. Every rank's `count` units land at recv + displs[p]; counts and displs are the
// same on every rank (they describe the result), so the path needs no agreement.
void allgatherv(MPI_Comm comm, const void* send, Index count, void* recv,
                const std::vector<Index>& counts, const std::vector<Index>& displs,
                MPI_Datatype type);

// Collective. Rows of `row_bytes` bytes, packed back to back in peer order: send_rows[p]
// rows from `send` go to rank p, recv_rows[p] rows from rank p land in `recv` (room for all
// of them, in peer order). The exchange of the point clouds' rows and records.
void alltoallv_rows(MPI_Comm comm, const void* send, const std::vector<Index>& send_rows,
                    void* recv, const std::vector<Index>& recv_rows, Index row_bytes);

// Collective: the count each rank sends this one (64-bit), given this rank's to each.
std::vector<Index> exchange_counts(MPI_Comm comm, const std::vector<Index>& send_counts);

// Messages packed back to back: their displacements (running sums of the counts) and total.
struct Packed {
  std::vector<Index> displs;
  Index total = 0;
};
Packed packed(const std::vector<Index>& counts);

}  // namespace tessera
