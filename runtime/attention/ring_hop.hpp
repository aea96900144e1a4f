#pragma once
// One hop of a ring: send a contiguous block to the next rank and receive the previous
// rank's into `recv`, non-blocking, so the caller computes on the current block meanwhile.
// Shared by the ring and the zig-zag ring attention.
#include "runtime/floor.hpp"
#include <mpi.h>

#include "runtime/comm/comm_timers.hpp"
#include "runtime/comm/mpi_datatype.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/comm/mpi_types.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

struct RingHop {
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  void start(MPI_Comm comm, const Tensor& send, const Tensor& recv, int next, int prev, int tag) {
    device::synchronize(send.device());  // MPI reads what kernels wrote
    const MPI_Datatype t = mpi_type_of(send.dtype());
    TESSERA_MPI(MPI_Irecv(recv.raw(), checked_count(recv.numel(), "ring receive"), t, prev, tag,
                          comm, &req[0]));
    TESSERA_MPI(MPI_Isend(send.raw(), checked_count(send.numel(), "ring send"), t, next, tag, comm,
                          &req[1]));
  }
  void wait() {
    ScopedCommTimer timer(comm_times().alltoall_s);
    TESSERA_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
  }
};

}  // namespace tessera
