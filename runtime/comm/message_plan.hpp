#pragma once
// MessagePlan: what one rank sends to and receives from each peer, as boxes of two local
// buffers, computed once from box intersections and shared by the halo exchange (ghost
// regions of a padded buffer) and redistribution (blocks of one layout into another). From
// it come the pack-kernel region tables (one launch packs every message) and the MPI
// derived types over the buffers (in place, no pack buffer), whichever transport runs it.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "decomp/box.hpp"
#include "kernels/region_pack.hpp"
#include "runtime/comm/mpi_datatype.hpp"

namespace tessera {

// Messages to or from one peer: its boxes, packed back to back in one buffer span.
struct PeerMessage {
  int peer = 0;      // rank in the plan's communicator
  Index offset = 0;  // first element in the message buffer
  Index count = 0;
  std::vector<Box> boxes;  // global boxes inside the side's frame, in plan order
  int first_region = 0;    // this message's first region in the side's region table
};

// One side of a plan (what is sent, or what is received): messages sorted by peer, over a
// contiguous row-major buffer covering the global box `frame`.
struct MessageSide {
  std::vector<PeerMessage> messages;
  Box frame;
  std::vector<kernels::PackRegion> regions;  // all messages' boxes, in message order
  std::vector<Index> shortest_run;           // per message: its shortest contiguous run

  Index total() const;  // elements of all messages
  // Where message i starts in the region table and in the message buffer; i == the number of
  // messages gives the ends (messages [first, last) are regions [region_at(first),
  // region_at(last)) over buffer elements up to element_at(last)).
  int region_at(std::size_t i) const;
  Index element_at(std::size_t i) const;
  // One MPI type per message: its boxes as subarrays of the frame, in plan order, so MPI
  // reads or writes the buffer in place. MPI_DATATYPE_NULL (not in place) for a message of
  // more than `most` elements, and for all where the frame's extents pass MPI's int.
  std::vector<MpiType> types(std::size_t elem_size, Index most) const;
};

struct MessagePlan {
  MessageSide send, recv;
};

// A side from (peer, box) entries sorted by peer (empty boxes dropped; several boxes per
// peer allowed) over a buffer covering `frame`.
MessageSide message_side(const std::vector<std::pair<int, Box>>& entries, const Box& frame);
// A side with one box per peer q (box[q], possibly empty).
MessageSide message_side(const std::vector<Box>& box_per_peer, const Box& frame);

}  // namespace tessera
