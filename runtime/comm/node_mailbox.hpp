#pragma once
// NodeMailbox: one buffer per rank in an MPI-3 shared-memory window over the ranks of a
// communicator that share a node. A rank packs outgoing data into its own buffer and its
// on-node peers read it in place (one copy in, one copy out, no transport fragments or
// rendezvous), as in MPI+MPI hybrid halo exchanges. Who may read when is the caller's
// protocol (zero-byte messages); sync() is the memory barrier the MPI-3 unified model asks
// for around it.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <cstddef>
#include <vector>

namespace tessera {

class NodeMailbox {
 public:
  // Collective over `comm`: finds which ranks share a node; allocates nothing yet.
  // group_ranks > 0 splits each node into groups of that many consecutive node ranks
  // (tests run mixed shared and message exchanges on one machine that way); 0: the
  // whole node shares.
  NodeMailbox(MPI_Comm comm, int group_ranks = 0);
  ~NodeMailbox();  // collective over the node group when a window exists (MPI_Win_free)
  NodeMailbox(const NodeMailbox&) = delete;
  NodeMailbox& operator=(const NodeMailbox&) = delete;

  // Collective over the node group: (re)allocates this rank's buffer with `bytes` (the
  // contents are not kept). Returns false, on every member alike and with nothing
  // allocated, when the group's buffers would take more than half of the free space of
  // the shared-memory backing store (/dev/shm, or OMPI_MCA_osc_sm_backing_directory;
  // TESSERA_NODE_SHARED_FREE_BYTES overrides what it reports): a container's small
  // /dev/shm would otherwise end in SIGBUS on first touch, not in an error.
  bool allocate(std::size_t bytes);
  // Whether `rank` of comm shares memory with this rank.
  bool shares(int rank) const { return shared_[static_cast<std::size_t>(rank)] != 0; }
  // The buffer of `rank` of comm (this rank's own when rank == its own); null unless
  // shared and allocated.
  unsigned char* buffer_of(int rank) const { return base_[static_cast<std::size_t>(rank)]; }
  unsigned char* mine() const { return mine_; }
  std::size_t bytes() const { return bytes_; }
  // Forgets the window without freeing it (no collective): for error unwinding, where
  // the other ranks may never come to MPI_Win_free.
  void leak() {
    win_ = MPI_WIN_NULL;
    node_ = MPI_COMM_NULL;
  }
  // Makes this rank's stores visible to, and other ranks' stores visible from, the window.
  void sync() const;

 private:
  void free_window();

  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  unsigned char* mine_ = nullptr;
  std::size_t bytes_ = 0;
  std::vector<int> comm_rank_of_node_rank_;
  std::vector<unsigned char*> base_;  // per rank of comm
  std::vector<char> shared_;          // per rank of comm
};

}  // namespace tessera
