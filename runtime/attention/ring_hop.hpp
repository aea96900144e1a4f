#pragma once
// One hop of a ring: send a contiguous block to the next rank and receive the previous
// rank's into `recv`, non-blocking, so the caller computes on the current block meanwhile.
// Shared by the ring and the zig-zag ring attention.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <exception>
#include <vector>

#include "runtime/comm/comm_timers.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/comm/mpi_types.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

struct RingHop {
  // The pieces of both messages (runtime/comm/message_pieces: blocks past 1 GiB are cut).
  std::vector<MPI_Request> req;
  // Device blocks go through host copies where MPI takes no device pointers.
  bool staged = false;
  Tensor send_host, recv_host, recv_target;
  // What MPI reads and writes until wait(): held here, so that a caller's error between
  // start() and wait() cannot free a buffer MPI is still writing.
  Tensor in_flight[2];

  RingHop() = default;
  RingHop(const RingHop&) = delete;
  RingHop& operator=(const RingHop&) = delete;
  ~RingHop() {
    if (req.empty()) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (std::uncaught_exceptions() > 0) {
      // Unwinding after an error the peers may not share: waiting could hang this rank before
      // its handler reaches MPI_Abort. The buffers are left to the process's end instead.
      new Tensor[2]{in_flight[0], in_flight[1]};  // never freed, by design
      return;
    }
    MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
  }

  void start(MPI_Comm comm, const Tensor& send, const Tensor& recv, int next, int prev, int tag) {
    device::synchronize(send.device());  // MPI reads what kernels wrote
    staged = !mpi_accepts(send.space()) || !mpi_accepts(recv.space());
    if (staged) {
      send_host = send.to(MemSpace::Host);
      recv_host = Tensor::empty(recv.shape(), recv.dtype(), MemSpace::Host);
      recv_target = recv;
    }
    const Tensor& s = staged ? send_host : send;
    const Tensor& r = staged ? recv_host : recv;
    const MPI_Datatype t = mpi_type_of(send.dtype());
    req.clear();
    in_flight[0] = s;
    in_flight[1] = r;
    irecv_pieces(r.raw(), r.numel(), t, prev, tag, comm, req);
    isend_pieces(s.raw(), s.numel(), t, next, tag, comm, req);
  }
  void wait() {
    {
      ScopedCommTimer timer(comm_times().alltoall_s);
      TESSERA_MPI(MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE));
    }
    req.clear();
    in_flight[0] = in_flight[1] = Tensor();
    if (staged) recv_target.copy_from(recv_host);
  }
};

}  // namespace tessera
