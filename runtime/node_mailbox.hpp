#pragma once
// NodeMailbox: one buffer per rank in an MPI-3 shared-memory window over the ranks of a
// communicator that share a node. A rank packs outgoing data into its own buffer and its
// on-node peers read it in place (one copy in, one copy out, no transport fragments or
// rendezvous), as in MPI+MPI hybrid halo exchanges. Who may read when is the caller's
// protocol (zero-byte messages); sync() is the memory barrier the MPI-3 unified model asks
// for around it.
#include <mpi.h>

#include <cstddef>
#include <vector>

namespace tessera {

class NodeMailbox {
 public:
  // Collective over `comm`. Each rank owns `bytes` of shared memory. group_ranks > 0 splits
  // each node into groups of that many consecutive node ranks (tests run mixed shared and
  // message exchanges on one machine that way); 0: the whole node shares.
  NodeMailbox(MPI_Comm comm, std::size_t bytes, int group_ranks = 0);
  ~NodeMailbox();  // collective over the node group (MPI_Win_free)
  NodeMailbox(const NodeMailbox&) = delete;
  NodeMailbox& operator=(const NodeMailbox&) = delete;

  // Whether `rank` of comm shares memory with this rank.
  bool shares(int rank) const { return shared_[static_cast<std::size_t>(rank)] != 0; }
  // The buffer of `rank` of comm (this rank's own when rank == its own); null unless shared.
  unsigned char* buffer_of(int rank) const { return base_[static_cast<std::size_t>(rank)]; }
  unsigned char* mine() const { return mine_; }
  std::size_t bytes() const { return bytes_; }
  // Makes this rank's stores visible to, and other ranks' stores visible from, the window.
  void sync() const;

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  unsigned char* mine_ = nullptr;
  std::size_t bytes_ = 0;
  std::vector<unsigned char*> base_;  // per rank of comm
  std::vector<char> shared_;          // per rank of comm
};

}  // namespace tessera
