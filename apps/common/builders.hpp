#pragma once
// Runtime objects from a TrainConfig: the optimizer, the learning-rate schedule, the
// loss, the model's element type and where it runs.
#include <memory>
#include <string>
#include <vector>

#include "apps/common/config.hpp"
#include "runtime/train/loss.hpp"
#include "runtime/train/optim.hpp"

namespace tessera::app {

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c, std::vector<NamedParameter> params);
// total_steps: the run's optimizer steps (train.steps, or epochs x steps per epoch);
// the cosine schedule reaches schedule.min_lr there.
LrSchedule make_schedule(const TrainConfig& c, std::int64_t total_steps);
LossKind loss_kind(const TrainLoopConfig& c);
DType model_dtype(const ModelConfig& c);
// Where the model runs: the rank's device where one exists (device >= 0), else the host.
MemSpace model_space(int device);
// What differs between two model signatures (Model::signature()), for an error message:
// "a unet, not a fno" or "in=1, not in=2; width=8, not width=16" (have, then want).
std::string signature_difference(const std::string& have, const std::string& want);

}  // namespace tessera::app
