#pragma once
// Context: owns MPI for the life of a program (init with a checked thread level,
// finalize on destruction), knows the node-local rank, picks one GPU per rank and
// whether MPI may be handed device pointers.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <optional>
#include <string>

#include "kernels/device/memory.hpp"

namespace tessera {

struct ContextOptions {
  // MPI is only called from the thread that created the Context.
  int thread_level = MPI_THREAD_FUNNELED;
  // Force CUDA-aware MPI on/off; unset: env TESSERA_CUDA_AWARE (0/1), else detected.
  std::optional<bool> cuda_aware;
  // Force the device id; unset: env TESSERA_DEVICE, else local_rank % device_count.
  std::optional<int> device;
  // OpenMP threads per rank; unset: OMP_NUM_THREADS when set, else the processors this rank
  // may run on divided among the node's ranks (at least 1), so ranks sharing a node do not
  // oversubscribe its cores (2 ranks x 2 threads on 2 cores run several times slower).
  std::optional<int> threads;
};

class Context {
 public:
  Context(int& argc, char**& argv, const ContextOptions& opts = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  MPI_Comm world() const { return world_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int device() const { return device_; }    // -1: no GPU in use
  int threads() const { return threads_; }  // OpenMP threads of this rank's host kernels
  // The processors this rank may run on divided among its node's ranks, at least 1: the
  // threads each rank gets by default, so ranks sharing a node do not oversubscribe it.
  int node_share_threads() const;
  bool cuda_aware() const { return cuda_aware_; }
  int thread_level() const { return provided_; }
  std::string describe() const;  // one line for logs

  // The live Context (throws if none exists).
  static Context& current();

 private:
  void start(const ContextOptions& opts);  // everything after MPI_Init (may throw)
  // The end exchange with `error` ("" on success), then the communicators and MPI released.
  void finish(const std::string& error) noexcept;

  bool owns_mpi_ = false;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm end_ = MPI_COMM_NULL;  // the destructor's end exchange (failure::end_of_context)
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, device_ = -1, provided_ = 0;
  int threads_ = 1;
  bool cuda_aware_ = false;
};

// Whether the MPI library supports CUDA device pointers (MPIX_Query_cuda_support).
bool mpi_is_cuda_aware();
// Whether MPI calls may be handed pointers into memory space `s` (device memory only
// with a live Context that found, or was told of, CUDA-aware MPI).
bool mpi_accepts(MemSpace s);

}  // namespace tessera
