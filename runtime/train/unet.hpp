#pragma once
// UNet on the layer graph, built from the sharded layers: per level a block of
// conv-norm-activation (twice), down by max pooling or a strided conv, up by nearest
// upsampling or a transposed conv, the encoder's output of each level concatenated
// into the decoder at the same level, and a 1x1 conv head.
//
//   level l has width * 2^l channels (l = 0 .. depth; depth is the bottleneck)
//   enc{l}:   block(cin -> C_l)                    enc0 takes in_channels
//   down{l}:  pool 2 (C_l) or conv k2 s2 (C_l -> C_l)          to level l+1
//   up{l}:    upsample x2 (C_{l+1}) or transposed conv k2 s2 (C_{l+1} -> C_l)
//   skip{l}:  concat(up{l}, enc{l})
//   dec{l}:   block(-> C_l)
//   head:     conv 1x1 (C_0 -> out_channels)
//
// Parameter names ("enc0.conv1.weight", "dec1.norm2.bias", "head.bias") come from the
// graph's registry and key the checkpoints. Any spatial extent divisible by 2^depth is
// accepted (2-D and 3-D, 1-D too); every spatial dim may be sharded, the batch too.
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "kernels/activation.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/graph.hpp"
#include "runtime/nn/norm_layers.hpp"
#include "runtime/train/model.hpp"

namespace tessera {

struct UNetOptions {
  int nd = 2;  // spatial dims, 1..3
  Index in_channels = 1, out_channels = 1;
  Index width = 16;  // channels of level 0
  int depth = 3;     // down/up steps
  Index kernel = 3;  // odd; "same" padding (kernel / 2 per side) of `padding`'s kind
  // The convolutions' padding at the domain's border (PyTorch's padding_mode): circular for
  // a periodic domain, reflect or replicate for the edge's values instead of zeros.
  PaddingMode padding = PaddingMode::Zeros;
  enum class Norm { Group, Batch, None } norm = Norm::Group;
  Index groups = 4;  // GroupNorm: must divide width
  kernels::Activation activation = kernels::Activation::GELU;
  enum class Down { Pool, StridedConv } down = Down::Pool;
  enum class Up { Upsample, TransposedConv } up = Up::Upsample;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  unsigned seed = 0;  // parameter init, the same on every rank
};

// Option values by the names configs use; throw listing the valid names.
UNetOptions::Norm unet_norm(const std::string& name);  // group | batch | none
UNetOptions::Down unet_down(const std::string& name);  // pool | conv
UNetOptions::Up unet_up(const std::string& name);      // upsample | transposed_conv
PaddingMode unet_padding(const std::string& name);     // zeros | circular | reflect | replicate
kernels::Activation activation_by_name(const std::string& name);  // relu | gelu | silu | tanh
// The names back ("group", "conv", "transposed_conv").
std::string name_of(UNetOptions::Norm n);
std::string name_of(UNetOptions::Down d);
std::string name_of(UNetOptions::Up u);

// A signature as checkpoints before 2026-12-06 stored it (norm, down and up as the enums'
// numbers: "norm=0 ... down=0 up=0") in today's words ("norm=group ... down=pool
// up=upsample"), so those checkpoints resume and load; any other text unchanged.
std::string current_unet_signature(const std::string& stored);

class UNet : public Model {
 public:
  explicit UNet(const UNetOptions& opts);

  Graph& graph() override { return graph_; }
  const UNetOptions& options() const { return opts_; }

  // Why a global input shape (N, C, spatial...) cannot be taken, or "" if it can
  // (same verdict on every rank: it depends on the shape only).
  std::string input_problem(const std::vector<Index>& shape) const override;
  std::string signature() const override;
  // Training mode (BatchNorm batch statistics) or evaluation (running statistics).
  void train(bool on) override;

  // State that is not a parameter: BatchNorm running statistics, "<node>.running_mean"
  // and "<node>.running_var" (float64, C entries), for checkpoints.
  std::vector<Buffer> buffers() const override;
  void load_buffers(const std::vector<Buffer>& b) override;  // throws naming a missing buffer

 private:
  Value block(const std::string& name, Value x, Index cin, Index cout);
  // The norm (if any) and activation after conv i of block `name`.
  Value norm_act(const std::string& name, int i, Value x, Index c);
  // Conv or ConvTranspose options with the model's dims, dtype and space and the next seed.
  template <class ConvOpts>
  ConvOpts conv_options(Index cin, Index cout);

  UNetOptions opts_;
  Graph graph_;
  unsigned next_seed_ = 0;
  std::vector<std::pair<std::string, std::shared_ptr<BatchNorm>>> batch_norms_;
};

}  // namespace tessera
