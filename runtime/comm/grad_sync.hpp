#pragma once
// GradSync: the one reducer of replicated parameters' gradients. Layers leave each rank's
// local contribution in Parameter::grad and declare in Parameter::grad_axes the mesh axes
// over which it is partial (the axes that shard their input); GradSync sums over those
// axes (and over GradSyncOptions::sum_axes, for parameters no layer declares), averages
// over the data-parallel `mean_axes` (where each replica's loss is a mean over its own
// batch), in one all-reduce per bucket.
//
// Buckets: parameters are packed, in reverse registration order (the order backward
// finishes them), into flat buffers of up to `bucket_bytes` (one dtype and memory space
// per bucket; a parameter larger than that has a bucket of its own). Each parameter's
// grad and value become views into its bucket's flat gradient and value buffers (as
// DDP's gradient_as_bucket_view), so the all-reduce works in place and an optimizer
// updates a whole bucket in one call. When the caller marks every parameter of a bucket
// ready, a non-blocking MPI_Iallreduce starts on it, overlapping the rest of backward
// (one per run of parameters with the same axes; normally the whole bucket). Buckets
// start strictly in index order on every rank (a bucket ready early waits for the ones
// before it), so ranks that mark in different orders still issue the same sequence of
// collectives. finish() starts what is left, waits and scales; call it before clipping
// and the optimizer step.
//
// Sharded parameters (runtime/nn/parameter_shard.hpp) are bucketed by their global size, so
// every rank cuts the same buckets; a block's gradient is summed over its grad_axes only, which
// must not include the axes it is sharded over (the ranks of a sum hold the same block).
//
// Which axes to sum and which to average: the losses of runtime/loss.hpp over the
// whole mesh are already means over the global batch, so their gradients are SUMMED
// over every axis that shards the data (what the layers declare; mean_axes empty).
// Averaging over a data axis is right for a loss that is a mean over each replica's own
// batch (LossOptions::axes without the data axis) with equal batch shards; an axis in
// mean_axes is averaged even where a layer declares it.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "runtime/comm/axes_comm.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

// Where GradSync's time went since the last reset_stats() (for the training log's
// compute / halo / all-reduce split).
struct GradSyncStats {
  double seconds = 0;       // inside GradSync: starting, waiting, scaling
  double wait_seconds = 0;  // of which waiting for all-reduces in finish()
  std::int64_t bytes = 0;   // bytes all-reduced (per rank)
  int allreduces = 0;
};

struct GradSyncOptions {
  std::vector<int> sum_axes;   // mesh axes summed for every parameter (besides its grad_axes)
  std::vector<int> mean_axes;  // mesh axes to average over (e.g. data)
  std::size_t bucket_bytes = std::size_t{25} << 20;
};

// One bucket's flat storage: the parameters' values and gradients lie in it back to
// back, in bucket order (params[i] at offsets[i]).
struct GradBucket {
  std::vector<int> params;     // indices into GradSync's parameter list
  std::vector<Index> offsets;  // element offset of each parameter
  Tensor value, grad;          // flat, one dtype and memory space
};

class GradSync {
 public:
  // Collective over the mesh (creates the reduction communicator). Every parameter
  // needs a contiguous value and a grad of its shape and dtype; the list must be the same
  // on every rank. Re-points the parameters' value and grad into the bucket buffers
  // (their contents kept).
  GradSync(const Mesh& mesh, std::vector<Parameter*> params, GradSyncOptions opts);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // This parameter's gradient is final for this step. Starts every bucket that is
  // complete and next in order; drives progress of the ones in flight.
  void mark_ready(const Parameter* p);
  void mark_ready(const std::vector<Parameter*>& ps);
  // Starts the buckets not started yet, waits for all, scales. Resets for the next step.
  void finish();
  // mark_ready(all) + finish(): the blocking form.
  void sync();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // Indices into the constructor's parameter list, per bucket.
  std::vector<std::vector<int>> bucket_layout() const;
  int buckets_started() const { return next_to_start_; }
  double scale() const { return scale_; }  // applied after the sum: 1 / (mean group size)
  const GradSyncStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  struct Flight {
    Tensor host;  // staging copy when MPI cannot take device memory
    std::vector<MPI_Request> reqs;
    std::vector<std::pair<Index, Index>> ranges;  // [begin, end) per request
  };

  std::vector<int> axes_of(const Parameter& p) const;
  const AxesComm& comm_for(const std::vector<int>& axes);
  void start(std::size_t b);
  void start_ready_in_order();
  void reset_step();

  Mesh mesh_;
  GradSyncOptions opts_;
  std::map<std::vector<int>, AxesComm> comms_;
  std::vector<Parameter*> params_;
  std::unordered_map<const Parameter*, std::size_t> index_of_;
  std::vector<int> bucket_of_;  // per parameter
  std::vector<bool> marked_;
  std::vector<GradBucket> buckets_;
  std::vector<int> pending_;  // per bucket: parameters not yet marked this step
  std::vector<Flight> flights_;
  int next_to_start_ = 0;
  double scale_ = 1.0;
  GradSyncStats stats_;
};

// Sums (and averages) the parameters' gradients as GradSync does, once and blocking: for
// callers without a training loop (tests comparing a sharded layer's gradients with one
// rank's). Collective over the mesh. Leaves the parameters' storage where it was.
void sync_grads(const Mesh& mesh, const std::vector<Parameter*>& params,
                const GradSyncOptions& opts = {});

}  // namespace tessera
