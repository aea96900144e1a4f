#pragma once
// Losses over the GLOBAL domain of sharded tensors. Each rank reduces its own shard
// (sums in double), one all-reduce combines them, and every rank gets the same value
// and the exact gradient of that value with respect to its own shard.
//
//   MSE:         L = sum over all cells (pred - target)^2 / (number of cells)
//   relative L2: L = mean over samples i of ||pred_i - target_i|| / ||target_i||
//                (2-norm over all non-batch dims of sample i, dim 0 is the batch;
//                the per-sample error of FNO papers, averaged over the batch)
//
// The sums run over the mesh axes in LossOptions::axes (empty: the whole mesh, the
// global loss). Leaving a data-parallel axis out makes the loss a mean over each
// replica's own batch (then average, not sum, the gradients over that axis; see
// runtime/grad_sync.hpp). Ranks that hold replicas of the same cells (an axis that
// shards no dim) count them once.
#include "runtime/floor.hpp"
#include <map>
#include <vector>

#include "runtime/comm/axes_comm.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {

struct LossOptions {
  std::vector<int> axes;  // mesh axes to reduce over; empty: all
  // Relative L2 without a gradient (validation, reports): samples whose target is zero
  // have no relative error and are left out of the mean (else they are an error).
  bool skip_zero_targets = false;
};

struct LossResult {
  double value = 0;   // the same on every rank of the reduction group
  ShardTensor grad;   // dL/dpred, pred's spec
  Index samples = 0;  // relative L2: the samples in the mean (0 and value 0: none had a target)
};

enum class LossKind { Mse, RelativeL2 };

class Loss {
 public:
  explicit Loss(LossKind kind, LossOptions opts = {}) : kind_(kind), opts_(std::move(opts)) {}
  // Collective over pred's mesh. pred and target: same global shape, dtype and memory
  // space; pred not Partial. A target sharded otherwise is redistributed to pred's spec. want_grad
  // = false skips the gradient (validation).
  LossResult operator()(const ShardTensor& pred, const ShardTensor& target, bool want_grad = true);
  LossKind kind() const { return kind_; }

 private:
  const AxesComm& comm_for(const Mesh& mesh);

  LossKind kind_;
  LossOptions opts_;
  std::map<MPI_Comm, AxesComm> comms_;  // by mesh communicator
};

// One-shot forms.
LossResult mse_loss(const ShardTensor& pred, const ShardTensor& target, bool want_grad = true);
LossResult relative_l2_loss(const ShardTensor& pred, const ShardTensor& target,
                            bool want_grad = true);

}  // namespace tessera
