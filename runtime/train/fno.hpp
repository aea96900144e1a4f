#pragma once
// FNO (Li et al., Fourier Neural Operator) on the layer graph, from the sharded layers:
//
//   coords:     the grid coordinates appended as channels (CoordinateChannels)
//   lift:       conv 1x1 (in_channels + nd -> width)
//   block{l}:   spectral(x) + conv 1x1(x), then the activation (not after the last block)
//   proj1/2:    conv 1x1 (width -> projection), activation, conv 1x1 (projection -> out)
//
// The spectral convolutions keep `modes` per spatial dim (runtime/spectral/spectral_conv),
// so the same parameters apply to any grid with at least 2 x modes points per dim: a model
// trained on 64^2 runs on 128^2 (the resolution invariance of neural operators). Every
// spatial dim may be sharded, the batch too.
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "kernels/activation.hpp"
#include "runtime/train/model.hpp"

namespace tessera {

struct FnoOptions {
  int nd = 2;  // spatial dims, 1..3
  Index in_channels = 1, out_channels = 1;
  Index width = 32;                 // channels of the Fourier blocks
  int layers = 4;                   // Fourier blocks
  std::vector<Index> modes = {12};  // retained modes per spatial dim (or one for all)
  Index projection = 128;           // hidden channels of the projection
  // Spectral weights sharded by mode (SpectralConv::shard_weights): bind the graph to its
  // input spec (Graph::bind) before registering the parameters.
  bool mode_sharded = false;
  kernels::Activation activation = kernels::Activation::GELU;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  unsigned seed = 0;  // parameter init, the same on every rank
};

// Why spatial extents cannot take `modes` retained modes per dim (one value for every dim,
// or one per dim), or "": a complex dim needs 2 m points, the last (real) dim 2 (m - 1).
// `shape` holds the extents from dim `first_spatial` on (2 for (N, C, spatial...), 0 for a
// bare grid); messages name the dim of `shape`. Apps check the training grid before
// building the model: the spectral weights grow with the modes.
std::string fno_modes_problem(const std::vector<Index>& modes, const std::vector<Index>& shape,
                              int first_spatial);

class Fno : public Model {
 public:
  explicit Fno(const FnoOptions& opts);

  Graph& graph() override { return graph_; }
  const FnoOptions& options() const { return opts_; }
  std::string input_problem(const std::vector<Index>& shape) const override;
  std::string signature() const override;

 private:
  FnoOptions opts_;
  std::vector<Index> modes_;
  Graph graph_;
};

}  // namespace tessera
