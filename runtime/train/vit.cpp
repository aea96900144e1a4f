#include "runtime/train/vit.hpp"

#include <memory>
#include <sstream>

#include "runtime/attention/multi_head_attention.hpp"
#include "runtime/attention/neighborhood_attention.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/conv_transpose_layer.hpp"
#include "runtime/nn/norm_layers.hpp"
#include "runtime/nn/pointwise_layers.hpp"
#include "runtime/nn/learned_positions.hpp"
#include "runtime/nn/position_embedding.hpp"
#include "runtime/nn/realign.hpp"

namespace tessera {

Vit::Vit(const VitOptions& o) : opts_(o) {
  TESSERA_CHECK(o.nd >= 1 && o.nd <= 3, "vit: " << o.nd << " spatial dims (1 to 3)");
  TESSERA_CHECK(o.in_channels >= 1 && o.out_channels >= 1 && o.patch >= 1 && o.dim >= 1 &&
                    o.heads >= 1 && o.mlp_ratio >= 1 && o.depth >= 1 && o.depth <= 64,
                "vit: in " << o.in_channels << ", out " << o.out_channels << ", patch " << o.patch
                           << ", dim " << o.dim << ", heads " << o.heads << ", depth " << o.depth
                           << ": each must be >= 1");
  TESSERA_CHECK(o.dim % o.heads == 0, "vit: model.dim = " << o.dim << " is not divisible by "
                                                          << "model.heads = " << o.heads);
  unsigned seed = o.seed * 7919u;
  auto linear = [&](Index cin, Index cout) {
    return std::shared_ptr<ConvNd>(token_linear(o.nd, cin, cout, o.dtype, o.space, seed++, ""));
  };
  NormOptions norm;
  norm.dtype = o.dtype;
  norm.space = o.space;
  const auto gelu = [] { return std::make_shared<ActivationLayer>(kernels::Activation::GELU); };
  ConvOptions pe;
  pe.nd = o.nd;
  pe.in_channels = o.in_channels;
  pe.out_channels = o.dim;
  pe.kernel = {o.patch};
  pe.stride = {o.patch};
  pe.dtype = o.dtype;
  pe.space = o.space;
  pe.seed = seed++;
  // Blocks of whole patches (the grid's split may cut them: 16 patches over 3 ranks), and
  // back to the grid's split at the end.
  const auto align = std::make_shared<AlignToGranule>(o.patch);
  Value x = graph_.layer("align", align, graph_.input("x"));
  x = graph_.layer("embed", std::make_shared<ConvNd>(pe), x);
  if (o.learned_positions) {
    LearnedPositionsOptions lp;
    lp.nd = o.nd;
    lp.channels = o.dim;
    lp.grid = o.position_grid;
    lp.dtype = o.dtype;
    lp.space = o.space;
    lp.seed = seed++;
    x = graph_.layer("positions", std::make_shared<LearnedPositions>(lp), x);
  } else {
    x = graph_.layer("positions", std::make_shared<SinusoidalPositions>(o.nd, o.dim), x);
  }
  for (int l = 0; l < o.depth; ++l) {
    const std::string b = "block" + std::to_string(l);
    std::shared_ptr<Layer> attn;
    if (o.window > 0) {
      NeighborhoodAttentionOptions a;
      a.nd = o.nd;
      a.channels = o.dim;
      a.heads = o.heads;
      a.kernel = {o.window};
      a.dtype = o.dtype;
      a.space = o.space;
      a.seed = seed;
      attn = std::make_shared<NeighborhoodAttention>(a);
    } else {
      MultiHeadAttentionOptions a;
      a.nd = o.nd;
      a.channels = o.dim;
      a.heads = o.heads;
      a.algorithm = o.attention;
      a.dtype = o.dtype;
      a.space = o.space;
      a.seed = seed;
      attn = std::make_shared<MultiHeadAttention>(a);
    }
    seed += 2;
    graph_.begin_segment();  // recomputed in backward with Graph::recompute
    Value h = graph_.layer(b + ".ln1", std::make_shared<ChannelLayerNorm>(o.dim, norm), x);
    h = graph_.layer(b + ".attn", attn, h);
    x = graph_.add(b + ".res1", x, h);
    h = graph_.layer(b + ".ln2", std::make_shared<ChannelLayerNorm>(o.dim, norm), x);
    h = graph_.layer(b + ".mlp1", linear(o.dim, o.mlp_ratio * o.dim), h);
    h = graph_.layer(b + ".mlp1.act", gelu(), h);
    h = graph_.layer(b + ".mlp2", linear(o.mlp_ratio * o.dim, o.dim), h);
    x = graph_.add(b + ".res2", x, h);
    graph_.end_segment();
  }
  x = graph_.layer("head.ln", std::make_shared<ChannelLayerNorm>(o.dim, norm), x);
  ConvTransposeOptions up;
  up.nd = o.nd;
  up.in_channels = o.dim;
  up.out_channels = o.out_channels;
  up.kernel = {o.patch};
  up.stride = {o.patch};
  up.dtype = o.dtype;
  up.space = o.space;
  up.seed = seed++;
  x = graph_.layer("head", std::make_shared<ConvTransposeNd>(up), x);
  graph_.output(graph_.layer("restore", std::make_shared<RestoreSplit>(align), x));
}

std::string vit_grid_problem(const std::vector<Index>& shape, Index patch, Index window) {
  std::ostringstream os;
  for (std::size_t d = 2; d < shape.size(); ++d)
    if (shape[d] % patch != 0) {
      os << "spatial extent " << shape[d] << " (dim " << d << " of " << shape_str(shape)
         << ") is not a multiple of model.patch = " << patch;
      break;
    } else if (window > 0 && shape[d] / patch < window) {
      os << "spatial extent " << shape[d] << " (dim " << d << " of " << shape_str(shape)
         << ") gives " << shape[d] / patch << " patches, fewer than model.window = " << window;
      break;
    }
  return os.str();
}

std::string Vit::input_problem(const std::vector<Index>& shape) const {
  std::ostringstream os;
  if (static_cast<int>(shape.size()) != opts_.nd + 2) {
    os << "the ViT takes (N, C, " << opts_.nd << " spatial dims), the data has shape "
       << shape_str(shape);
  } else if (shape[1] != opts_.in_channels) {
    os << "the ViT takes " << opts_.in_channels << " input channels, the data has " << shape[1];
  } else {
    return vit_grid_problem(shape, opts_.patch, opts_.window);
  }
  return os.str();
}

std::string Vit::signature() const {
  std::ostringstream os;
  os << "vit nd=" << opts_.nd << " in=" << opts_.in_channels << " out=" << opts_.out_channels
     << " patch=" << opts_.patch << " dim=" << opts_.dim << " depth=" << opts_.depth
     << " heads=" << opts_.heads << " window=" << opts_.window << " mlp_ratio=" << opts_.mlp_ratio
     << " dtype=" << name_of(opts_.dtype);
  if (opts_.learned_positions) os << " positions=learned:" << shape_str(opts_.position_grid);
  return os.str();
}

}  // namespace tessera
