#pragma once
// tessera-train --dry-run: what one training step of the configured UNet costs on a given
// global grid split over a given number of domain ranks, without data or communication.
// The layers' output partitions and halo widths come from the layers themselves and the
// decomp geometry the runtime's halo exchanges are planned with (window_halo,
// halo_geometry), so the halo volumes are the ones a real step exchanges. Per rank and
// layer: FLOPs and bytes of the local kernels (forward + backward, counted as the kernels
// do the work: direct convolution, two-pass normalization), halo bytes sent to other ranks
// (forward exchange + backward adjoint), statistics all-reduce bytes; per step: the
// parameter-gradient all-reduce. scripts/scaling_model.py turns these into time.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/unet.hpp"

namespace tessera::app {

struct LayerVolume {
  std::string name, kind;            // "enc0.conv1", "conv"
  std::vector<Index> out_shape;      // global output shape
  double flops = 0, bytes = 0;       // local kernels, forward + backward, busiest rank
  double out_bytes = 0;              // the busiest rank\'s output block (kept for backward)
  std::int64_t halo_bytes = 0;       // sent to other ranks per step, busiest rank
  int halo_exchanges = 0;            // exchanges per step (forward + adjoint) when ranks > 1
  int halo_messages = 0;             // messages per step of the busiest rank
  std::int64_t allreduce_bytes = 0;  // statistics all-reduces per step (per rank)
  int allreduces = 0;
};

struct StepVolumes {
  int ranks = 1;
  std::vector<Index> input_shape;  // global (N, C, spatial...)
  std::vector<LayerVolume> layers;
  Index parameters = 0;
  std::int64_t grad_allreduce_bytes = 0;  // per rank per step (0 on one rank)
  std::size_t elem_size = 4;
  // Per-step totals over the layers (each the busiest rank's).
  double flops() const;
  double bytes() const;
  double activation_bytes() const;  // outputs of every layer: what backward keeps
  std::int64_t halo_bytes() const;
  int halo_messages() const;
  std::int64_t stat_allreduce_bytes() const;
  int stat_allreduces() const;
};

// The UNet of `o` on a global input (batch, o.in_channels, grid...) split along the first
// spatial dim over `ranks` domain ranks, as tessera-train's auto mesh splits it.
StepVolumes dry_run(const UNetOptions& o, Index batch, const std::vector<Index>& grid, int ranks);

std::string dry_run_table(const StepVolumes& v);  // one line per layer, then the totals
std::string dry_run_json(const StepVolumes& v);

}  // namespace tessera::app
