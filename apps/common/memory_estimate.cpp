#include "apps/common/memory_estimate.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <string>

#include "apps/common/node_memory.hpp"
#include "kernels/device/device.hpp"
#include "kernels/device/memory.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/nn/parameter_shard.hpp"

namespace tessera::app {

int optimizer_states(const OptimConfig& o) {
  if (o.name == "sgd") return o.momentum > 0 ? 1 : 0;
  return 2;  // adam, adamw
}

double kept_activation_bytes(const std::vector<NodeCost>& nodes) {
  double kept = 0;
  std::map<int, double> segment;
  for (const NodeCost& c : nodes) {
    kept += c.kept ? c.out_bytes : 0;
    if (c.segment >= 0)
      segment[c.segment] += c.cost.saved_bytes + (c.kept_in_segment ? c.out_bytes : 0);
    else
      kept += c.cost.saved_bytes;
    for (int s : c.copied_in) segment[s] += c.out_bytes;
  }
  double largest_segment = 0;
  for (const auto& [id, bytes] : segment) largest_segment = std::max(largest_segment, bytes);
  return kept + largest_segment;
}

MemoryEstimate estimate_training_memory(const Graph& g, const ShardSpec& batch_input,
                                        const ShardSpec& batch_target, DType dtype, int states,
                                        double data_bytes, MemSpace space, int layout_ranks) {
  const double es = static_cast<double>(size_of(dtype));
  MemoryEstimate m;
  m.space = space;
  m.data = data_bytes;
  // Parameters as bound: this rank's blocks of sharded ones. Value and gradient (GradSync's
  // buckets are views of them; both exist already), and the optimizer's state.
  for (const auto& np : g.parameters()) {
    const double share = np.param->awaits_layout ? 1.0 / std::max(1, layout_ranks) : 1.0;
    const double bytes =
        static_cast<double>(np.param->awaits_layout ? numel_of(global_shape(*np.param))
                                                    : np.param->value.numel()) *
        es * share;
    m.parameters += bytes * (2.0 + states);
    m.held += 2.0 * bytes;
  }
  // Forward keeps every kept output and each op's saved tensors until backward; backward
  // holds an output's gradient and its input's gradient at once, and the largest kernel
  // scratch; the batch (inputs and targets) and the prediction live through the step.
  double largest = 0, scratch = 0, host_scratch = 0;
  const std::vector<NodeCost> nodes = g.costs({batch_input}, dtype);
  for (const NodeCost& c : nodes) {
    largest = std::max(largest, c.out_bytes);
    scratch = std::max(scratch, c.cost.scratch_bytes);
    host_scratch = std::max(host_scratch, c.cost.host_scratch_bytes);
  }
  const double kept = kept_activation_bytes(nodes);
  if (space == MemSpace::Host) m.host_only = std::max(0.0, host_scratch - scratch);
  m.activations = kept + 2.0 * largest + scratch + m.host_only + busiest_elems(batch_input) * es +
                  busiest_elems(batch_target) * es;
  return m;
}

namespace {
std::string parts(const MemoryEstimate& m) {
  return "data " + memory_text(m.data) + ", parameters and optimizer " + memory_text(m.parameters) +
         ", activations " + memory_text(m.activations);
}
}  // namespace

std::string describe(const MemoryEstimate& m) {
  return memory_text(m.total()) + " per rank (" + parts(m) + ")";
}

void check_memory_fits(MPI_Comm comm, const MemoryEstimate& need) {
  const std::string advice = "a smaller model, batch or grid, or more nodes";
  const bool on_host = need.space == MemSpace::Host;
  const std::string detail =
      " (" + parts(need) + (on_host ? "" : "; host: the data, the rest on the device") + ")";
  check_node_memory(comm, need.host(), on_host ? "training" : "training (host memory)", detail,
                    advice, on_host ? need.held : 0);
  std::ostringstream os;
  bool fits = true;
  if (!on_host) {  // one device per rank: its free memory, plus what the model holds on it
    // and the blocks its set-up freed into the cache (ours to reuse)
    const double have =
        static_cast<double>(device::free_bytes() + cached_device_bytes()) + need.held;
    if (need.device() > have) {
      fits = false;
      os << "training needs about " << memory_text(need.device()) << " of device memory per rank"
         << detail << "; this rank's device has " << memory_text(have) << " free (" << advice
         << ")";
    }
  }
  // TESSERA_MEMORY_LIMIT_MB caps each memory space's tracked bytes per rank.
  const auto limit = static_cast<double>(memory_limit());
  for (const auto& [part, name] : {std::pair{need.host(), "host"}, {need.device(), "device"}})
    if (fits && limit > 0 && part > limit) {
      fits = false;
      os << "training needs about " << memory_text(part) << " of " << name << " memory per rank"
         << detail << "; TESSERA_MEMORY_LIMIT_MB allows " << memory_text(limit) << " (" << advice
         << ")";
    }
  collective_check(comm, fits, os.str());
}

}  // namespace tessera::app
