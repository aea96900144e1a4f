#include "apps/common/dry_run.hpp"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/common/node_memory.hpp"
#include "decomp/error.hpp"
#include "runtime/nn/parameter_shard.hpp"

namespace tessera::app {

OpCost StepVolumes::total() const {
  OpCost t;
  for (const auto& l : layers) t += l.cost;
  return t;
}

double StepVolumes::replay_flops() const {
  double f = 0;
  for (const auto& l : layers) f += replay_flops_of(l);
  return f;
}

double StepVolumes::replay_halo_bytes() const {
  double b = 0;
  for (const auto& l : layers) b += replay_halo_bytes_of(l);
  return b;
}

double StepVolumes::activation_bytes() const {
  return kept_activation_bytes(layers);
}

StepVolumes dry_run(Model& model, const std::string& model_name, const std::vector<Index>& shape,
                    int ranks, DType dtype, bool relative_l2_loss, int optimizer_states) {
  TESSERA_CHECK(ranks >= 1, "dry run: " << ranks << " ranks");
  TESSERA_CHECK(shape.size() >= 3,
                "dry run: input shape " << shape_str(shape) << " has no spatial dims");
  const std::string problem = model.input_problem(shape);
  TESSERA_CHECK(problem.empty(), "dry run: " << problem);
  TESSERA_CHECK(model.graph().costs_complete(),
                "dry run: the model's communication depends on the data (point neighbourhoods)");
  // The auto mesh: one domain axis over the first spatial dim, balanced.
  std::vector<Placement> dims(shape.size(), Replicate());
  dims[2] = Shard(0);
  const ShardSpec input(shape, dims, std::vector<int>{ranks});

  StepVolumes v;
  v.model = model_name;
  v.ranks = ranks;
  v.input_shape = shape;
  v.elem_size = size_of(dtype);
  v.layers = model.graph().costs({input}, dtype);
  const ShardSpec target = model.graph().output_specs({input}).front();
  v.memory = estimate_training_memory(model.graph(), input, target, dtype, optimizer_states, 0,
                                      MemSpace::Host, ranks);
  for (const auto& np : model.graph().parameters())
    v.parameters += numel_of(global_shape(*np.param));
  if (ranks > 1) {
    v.grad_allreduce_bytes =
        (v.parameters - v.total().whole_grad_elems) * static_cast<std::int64_t>(v.elem_size);
    // Relative L2: sum (p - y)^2, sum y^2 and a count per sample, float64; MSE: two sums.
    v.loss_allreduce_bytes = relative_l2_loss ? 3 * shape[0] * 8 : 2 * 8;
    // Sharded parameters (laid out over the domain axis when bound): the gradient norm sums
    // their blocks' squares, one float64.
    for (const auto& np : model.graph().parameters())
      if (np.param->awaits_layout || np.param->shard) {
        v.loss_allreduce_bytes += 8;
        break;
      }
  }
  return v;
}

std::string dry_run_table(const StepVolumes& v) {
  const OpCost t = v.total();
  std::ostringstream os;
  os << "dry run: " << v.model << " on " << shape_str(v.input_shape) << " over " << v.ranks
     << " domain rank(s) (first spatial dim split), " << v.parameters << " parameters; ";
  if (v.micro_batches > 1)
    os << "per micro-batch (train.accumulate = " << v.micro_batches << ": a step runs "
       << v.micro_batches << " of them, then one gradient all-reduce), busiest rank:\n";
  else
    os << "per step, busiest rank:\n";
  os << std::left << std::setw(16) << "layer" << std::right << std::setw(22) << "output"
     << std::setw(12) << "MFLOP" << std::setw(11) << "MB" << std::setw(12) << "halo bytes"
     << std::setw(6) << "msgs" << std::setw(14) << "all-to-all B" << std::setw(12) << "ring B"
     << std::setw(14) << "allreduce B"
     << "  op\n";
  for (const auto& l : v.layers)
    os << std::left << std::setw(16) << l.name << std::right << std::setw(22)
       << shape_str(l.out_shape) << std::setw(12) << std::fixed << std::setprecision(2)
       << l.cost.flops / 1e6 << std::setw(11) << l.cost.bytes / 1e6 << std::setw(12)
       << l.cost.halo_bytes << std::setw(6) << l.cost.halo_messages << std::setw(14)
       << l.cost.alltoall_bytes << std::setw(12) << l.cost.ring_bytes << std::setw(14)
       << l.cost.allreduce_bytes << "  " << l.op << '\n';
  os << std::defaultfloat << std::setprecision(4) << "total: " << t.flops / 1e9 << " GFLOP, "
     << t.bytes / 1e6 << " MB of local kernel traffic, halo " << t.halo_bytes << " bytes in "
     << t.halo_messages << " messages, all-to-all " << t.alltoall_bytes << " bytes in "
     << t.alltoalls << " calls, ring " << t.ring_bytes << " bytes in " << t.ring_messages
     << " messages, all-gather " << t.allgather_bytes << " bytes, reduce-scatter "
     << t.reduce_scatter_bytes << " bytes, statistics all-reduce " << t.allreduce_bytes
     << " bytes in " << t.allreduces << " calls, loss all-reduce " << v.loss_allreduce_bytes
     << " bytes, gradient all-reduce " << v.grad_allreduce_bytes << " bytes\n";
  if (v.replay_flops() > 0 || v.replay_halo_bytes() > 0)
    os << "recompute replays the segments' forward in backward: about +" << v.replay_flops() / 1e9
       << " GFLOP (a third of their step's) and +"
       << static_cast<std::int64_t>(v.replay_halo_bytes())
       << " halo bytes (their forward exchanges), beyond the totals above\n";
  os << "memory per rank for training, busiest rank, without the data cache: "
     << memory_text(v.memory.parameters + v.memory.activations) << " (parameters and optimizer "
     << memory_text(v.memory.parameters) << ", activations " << memory_text(v.memory.activations)
     << ")\n";
  return os.str();
}

namespace {
nlohmann::json cost_json(const OpCost& c) {
  return {{"flops", c.flops},
          {"bytes", c.bytes},
          {"saved_bytes", c.saved_bytes},
          {"scratch_bytes", c.scratch_bytes},
          {"host_scratch_bytes", c.host_scratch_bytes},
          {"halo_bytes", c.halo_bytes},
          {"halo_exchanges", c.halo_exchanges},
          {"halo_messages", c.halo_messages},
          {"ring_bytes", c.ring_bytes},
          {"ring_messages", c.ring_messages},
          {"alltoall_bytes", c.alltoall_bytes},
          {"alltoalls", c.alltoalls},
          {"allgather_bytes", c.allgather_bytes},
          {"allgathers", c.allgathers},
          {"reduce_scatter_bytes", c.reduce_scatter_bytes},
          {"reduce_scatters", c.reduce_scatters},
          {"allreduce_bytes", c.allreduce_bytes},
          {"allreduces", c.allreduces},
          {"whole_grad_elems", c.whole_grad_elems}};
}
}  // namespace

std::string dry_run_json(const StepVolumes& v) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : v.layers) {
    nlohmann::json j = cost_json(l.cost);
    j["name"] = l.name;
    j["op"] = l.op;
    j["out_shape"] = l.out_shape;
    j["out_bytes"] = l.out_bytes;
    j["kept"] = l.kept;
    j["segment"] = l.segment;  // -1: not replayed (no segment, or recompute off)
    j["replay_flops"] = StepVolumes::replay_flops_of(l);
    j["replay_halo_bytes"] = StepVolumes::replay_halo_bytes_of(l);
    layers.push_back(j);
  }
  const OpCost t = v.total();
  nlohmann::json j = cost_json(t);
  // The names the UNet's first dry run gave the statistics all-reduces.
  j["stat_allreduce_bytes"] = t.allreduce_bytes;
  j["stat_allreduces"] = t.allreduces;
  j["model"] = v.model;
  j["ranks"] = v.ranks;
  j["input_shape"] = v.input_shape;
  j["micro_batches"] = v.micro_batches;
  j["parameters"] = v.parameters;
  j["elem_size"] = v.elem_size;
  j["activation_bytes"] = v.activation_bytes();
  j["replay_flops"] = v.replay_flops();
  j["replay_halo_bytes"] = v.replay_halo_bytes();
  j["loss_allreduce_bytes"] = v.loss_allreduce_bytes;
  j["grad_allreduce_bytes"] = v.grad_allreduce_bytes;
  j["memory_parameters_bytes"] = v.memory.parameters;  // with gradients and optimizer state
  j["memory_activations_bytes"] = v.memory.activations;
  // Of the activations: host kernels' scratch (the convolutions' channels-last copies), which
  // a device run does not take (scripts/scaling_model.py counts it for host machines only).
  j["memory_host_only_bytes"] = v.memory.host_only;
  j["layers"] = layers;
  return j.dump(2) + "\n";
}

}  // namespace tessera::app
