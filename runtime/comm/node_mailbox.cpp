#include "runtime/comm/node_mailbox.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "runtime/comm/mpi_error.hpp"

namespace tessera {

NodeMailbox::NodeMailbox(MPI_Comm comm, int group_ranks) {
  TESSERA_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_));
  if (group_ranks > 0) {
    int r = 0;
    TESSERA_MPI(MPI_Comm_rank(node_, &r));
    MPI_Comm group = MPI_COMM_NULL;
    TESSERA_MPI(MPI_Comm_split(node_, r / group_ranks, r, &group));
    TESSERA_MPI(MPI_Comm_free(&node_));
    node_ = group;
  }
  int size = 0, node_size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  TESSERA_MPI(MPI_Comm_size(node_, &node_size));
  MPI_Group g_comm, g_node;
  TESSERA_MPI(MPI_Comm_group(comm, &g_comm));
  TESSERA_MPI(MPI_Comm_group(node_, &g_node));
  std::vector<int> node_ranks(static_cast<std::size_t>(node_size));
  std::iota(node_ranks.begin(), node_ranks.end(), 0);
  comm_rank_of_node_rank_.resize(node_ranks.size());
  TESSERA_MPI(MPI_Group_translate_ranks(g_node, node_size, node_ranks.data(), g_comm,
                                        comm_rank_of_node_rank_.data()));
  MPI_Group_free(&g_comm);
  MPI_Group_free(&g_node);
  base_.assign(static_cast<std::size_t>(size), nullptr);
  shared_.assign(base_.size(), 0);
  for (int r : comm_rank_of_node_rank_) shared_[static_cast<std::size_t>(r)] = 1;
}

namespace {
// Free bytes of the store behind shared-memory windows; max() when unknown.
double backing_store_free_bytes() {
  if (const char* v = std::getenv("TESSERA_NODE_SHARED_FREE_BYTES")) return std::atof(v);
  const char* dir = std::getenv("OMPI_MCA_osc_sm_backing_directory");
  struct statvfs st {};
  if (statvfs(dir ? dir : "/dev/shm", &st) != 0) return std::numeric_limits<double>::max();
  return static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
}
}  // namespace

bool NodeMailbox::allocate(std::size_t bytes) {
  free_window();
  // One verdict for the whole group, from its first rank's view of the node.
  double need = static_cast<double>(bytes), total = 0;
  TESSERA_MPI(MPI_Allreduce(&need, &total, 1, MPI_DOUBLE, MPI_SUM, node_));
  int node_rank = 0, fits = 1;
  TESSERA_MPI(MPI_Comm_rank(node_, &node_rank));
  if (node_rank == 0) {
    const double free_bytes = backing_store_free_bytes();
    fits = total <= free_bytes / 2;
    static bool warned = false;
    if (!fits && !warned) {
      warned = true;
      std::fprintf(stderr,
                   "tessera: node-shared halo buffers need %.1f KiB, the shared-memory store "
                   "has %.1f KiB free; these exchanges use messages\n",
                   total / 1024, free_bytes / 1024);
    }
  }
  TESSERA_MPI(MPI_Bcast(&fits, 1, MPI_INT, 0, node_));
  if (!fits) return false;
  // Each rank's segment may live on its own NUMA node; nobody needs them contiguous.
  MPI_Info info;
  TESSERA_MPI(MPI_Info_create(&info));
  TESSERA_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  void* mine = nullptr;
  const int rc =
      MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, info, node_, &mine, &win_);
  MPI_Info_free(&info);
  TESSERA_MPI(rc);
  mine_ = static_cast<unsigned char*>(mine);
  bytes_ = bytes;
  // A passive-target epoch for the whole lifetime: MPI_Win_sync needs one.
  TESSERA_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_));
  for (std::size_t n = 0; n < comm_rank_of_node_rank_.size(); ++n) {
    MPI_Aint sz = 0;
    int disp = 0;
    void* base = nullptr;
    TESSERA_MPI(MPI_Win_shared_query(win_, static_cast<int>(n), &sz, &disp, &base));
    base_[static_cast<std::size_t>(comm_rank_of_node_rank_[n])] =
        static_cast<unsigned char*>(base);  // null for a zero-byte segment
  }
  return true;
}

void NodeMailbox::free_window() {
  if (win_ == MPI_WIN_NULL) return;
  MPI_Win_unlock_all(win_);
  MPI_Win_free(&win_);
  mine_ = nullptr;
  bytes_ = 0;
  std::fill(base_.begin(), base_.end(), nullptr);
}

NodeMailbox::~NodeMailbox() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  free_window();
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

void NodeMailbox::sync() const {
  TESSERA_MPI(MPI_Win_sync(win_));
}

}  // namespace tessera
