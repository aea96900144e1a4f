#pragma once
// HaloExchange: fills the ghost cells of a HaloTensor from their owners (forward,
// insert), or sends ghost values back and adds them into their owners (adjoint, as
// PETSc's local-to-global ADD). One plan, built from box intersections once, runs both
// ways. Split phase: begin() packs and posts, finish() waits and unpacks, so interior
// work can overlap the transfer. Corners and edges come in the same round; periodic
// dims wrap; ghosts wider than a neighbour's shard reach further ranks.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <memory>
#include <vector>

#include <string>
#include <utility>

#include "runtime/comm/transport.hpp"
#include "runtime/tensor/halo_tensor.hpp"

namespace tessera {

// The process-wide default of HaloOptions::deterministic: true (repeatable runs); a
// program may turn it off before building its layers (tessera-train's train.deterministic).
bool halo_deterministic_default();
void set_halo_deterministic_default(bool on);

struct HaloOptions {
  std::vector<bool> periodic;  // per tensor dim; empty: none
  // Ghost cells at open (non-periodic) domain boundaries: zero them, or leave as they are.
  enum class OpenFill { Zero, Keep } open_fill = OpenFill::Zero;
  // Adjoint additions in a fixed order (bitwise reproducible), not in arrival order.
  bool deterministic = halo_deterministic_default();
  // Forward exchanges on host memory: MPI reads and writes the padded buffer through
  // derived datatypes (no pack buffer) for messages whose contiguous runs are at least
  // in_place_min_run_bytes long; shorter-run messages (W-faces of a few cells) are packed
  // by our own loop, which is cheaper per run than MPI's datatype engine. false: pack,
  // send, unpack every message, as on device memory.
  bool in_place = true;
  std::size_t in_place_min_run_bytes = 64;
  // Host memory: peers on one node exchange through an MPI-3 shared-memory window. The
  // sender packs into its buffer there and the receiver unpacks straight out of it (two
  // copies and two zero-byte signals per message, no transport fragments), which takes
  // precedence over in_place for those peers. Peers on other nodes, and device memory,
  // use messages.
  bool node_shared = true;
  // Splits each node's sharing group into groups of this many consecutive ranks (0: the
  // whole node), so that mixed shared and message exchanges run on one machine.
  int node_group_ranks = 0;
};

class HaloExchange {
 public:
  // Collective over the mesh. Widths are those of the HaloTensors it will run on.
  HaloExchange(const Mesh& mesh, const ShardSpec& spec, const std::vector<Index>& left,
               const std::vector<Index>& right, const HaloOptions& opts = {});
  // Widths per block (or uniform): layers whose halo differs from rank to rank.
  HaloExchange(const Mesh& mesh, const ShardSpec& spec, const HaloWidths& widths,
               const HaloOptions& opts = {});
  ~HaloExchange();
  HaloExchange(const HaloExchange&) = delete;
  HaloExchange& operator=(const HaloExchange&) = delete;

  // One plan, two directions (as PETSc's VecScatterBegin/End with SCATTER_FORWARD or
  // SCATTER_REVERSE): Forward, ghosts := owners' values; Adjoint, owners += ghost values and
  // the ghosts end at zero. finish() completes whichever direction began.
  void begin(const HaloTensor& t, Direction d);
  // Forward: ghosts := owners' values.
  void begin(const HaloTensor& t) { begin(t, Direction::Forward); }
  void finish();
  void exchange(const HaloTensor& t) {
    begin(t);
    finish();
  }
  // Adjoint: owners += ghost values; ghosts are then zero (the adjoint of a copy).
  void begin_adjoint(const HaloTensor& t) { begin(t, Direction::Adjoint); }
  void finish_adjoint();
  void exchange_adjoint(const HaloTensor& t) {
    begin_adjoint(t);
    finish_adjoint();
  }

  // Cells this rank receives per forward exchange (from other ranks and itself), and
  // the bytes that travel between different ranks.
  Index cells_received() const;
  Index cells_sent() const;
  std::size_t bytes_to_other_ranks(std::size_t elem_size) const;
  // (peer, elements) of each forward message, and the communicator they travel on
  // (rank == block id): for benchmarks that compare against raw point-to-point.
  std::vector<std::pair<int, Index>> send_counts() const;
  std::vector<std::pair<int, Index>> recv_counts() const;
  MPI_Comm comm() const;
  // Whether on-node peers go through node-shared buffers (HaloOptions::node_shared, and
  // room for them in the node's shared memory).
  bool node_shared() const;
  // (peer, transport) of each message this rank sent in the last begin(), and a printable
  // summary ("forward: 2 in-place, 1 node-shared"): which transport the engine chose.
  std::vector<std::pair<int, Transport>> last_transports() const;
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
