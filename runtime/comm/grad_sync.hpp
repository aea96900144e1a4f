#pragma once
// GradSync: the all-reduce of replicated parameters' gradients after backward, in
// buckets. Gradients are summed over some mesh axes (the domain axes: each rank holds
// the contribution of its subdomain) and averaged over others (data-parallel axes,
// where each replica's loss is a mean over its own batch), in one all-reduce per
// bucket over the communicator spanning those axes.
//
// Buckets: parameters are packed, in reverse registration order (the order backward
// finishes them), into flat buffers of up to `bucket_bytes` (one dtype and memory
// space per bucket; a parameter larger than that has a bucket of its own). When the
// caller marks every parameter of a bucket ready, its gradients are copied into the
// buffer and a non-blocking MPI_Iallreduce starts, overlapping the rest of backward.
// Buckets start strictly in index order on every rank (a bucket ready early waits for
// the ones before it), so ranks that mark in different orders still issue the same
// sequence of collectives. finish() starts what is left, waits, scales and copies the
// results back into Parameter::grad; call it before clipping and the optimizer step.
//
// Which axes to sum and which to average: the losses of runtime/loss.hpp over the
// whole mesh are already means over the global batch, so their gradients are SUMMED
// over every axis that shards the data (mean_axes empty). Averaging over a data axis
// is right for a loss that is a mean over each replica's own batch (LossOptions::axes
// without the data axis) with equal batch shards. Axes over which the data is
// replicated must appear in neither list.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/comm/axes_comm.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

// Where GradSync's time went since the last reset_stats() (for the training log's
// compute / halo / all-reduce split).
struct GradSyncStats {
  double seconds = 0;       // inside GradSync: packing, starting, waiting, unpacking
  double wait_seconds = 0;  // of which waiting for all-reduces in finish()
  std::int64_t bytes = 0;   // bytes all-reduced (per rank)
  int allreduces = 0;
};

struct GradSyncOptions {
  std::vector<int> sum_axes;   // mesh axes to sum over (e.g. domain)
  std::vector<int> mean_axes;  // mesh axes to average over (e.g. data)
  std::size_t bucket_bytes = std::size_t{25} << 20;
};

class GradSync {
 public:
  // Collective over the mesh (creates the reduction communicator). Every parameter
  // needs a defined grad of its value's shape; the list must be the same on every rank.
  GradSync(const Mesh& mesh, std::vector<Parameter*> params, GradSyncOptions opts);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // This parameter's gradient is final for this step. Starts every bucket that is
  // complete and next in order; drives progress of the ones in flight.
  void mark_ready(const Parameter* p);
  void mark_ready(const std::vector<Parameter*>& ps);
  // Starts the buckets not started yet, waits for all, writes the reduced gradients
  // back. Resets for the next step.
  void finish();
  // mark_ready(all) + finish(): the blocking form.
  void sync();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Indices into the constructor's parameter list, per bucket.
  std::vector<std::vector<int>> bucket_layout() const;
  int buckets_started() const { return next_to_start_; }
  double scale() const { return scale_; }  // applied after the sum: 1 / (mean group size)
  const GradSyncStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  struct Bucket {
    std::vector<int> params;
    std::vector<Index> offsets;  // element offset of each parameter in the buffer
    Tensor buffer;               // flat, in the gradients' memory space
    Tensor host;                 // staging copy when MPI cannot take device memory
    int pending = 0;             // parameters not yet marked this step
    MPI_Request req = MPI_REQUEST_NULL;
  };

  void start(Bucket& b);
  void start_ready_in_order();
  void reset_step();

  AxesComm comm_;
  std::vector<Parameter*> params_;
  std::unordered_map<const Parameter*, std::size_t> index_of_;
  std::vector<int> bucket_of_;  // per parameter
  std::vector<bool> marked_;
  std::vector<Bucket> buckets_;
  int next_to_start_ = 0;
  double scale_ = 1.0;
  GradSyncStats stats_;
};

}  // namespace tessera
