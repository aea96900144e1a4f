#include "runtime/train/transolver.hpp"

#include <memory>
#include <sstream>

#include "runtime/attention/physics_attention.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/coordinate_channels.hpp"
#include "runtime/nn/norm_layers.hpp"
#include "runtime/nn/pointwise_layers.hpp"

namespace tessera {

Transolver::Transolver(const TransolverOptions& o) : opts_(o) {
  TESSERA_CHECK(o.nd >= 1 && o.nd <= 3, "transolver: " << o.nd << " token dims (1 to 3)");
  TESSERA_CHECK(o.in_channels >= 1 && o.out_channels >= 1 && o.width >= 1 && o.heads >= 1 &&
                    o.slices >= 1 && o.mlp_ratio >= 1,
                "transolver: in " << o.in_channels << ", out " << o.out_channels << ", width "
                                  << o.width << ", heads " << o.heads << ", slices " << o.slices
                                  << ", mlp_ratio " << o.mlp_ratio << ": each must be >= 1");
  TESSERA_CHECK(o.width % o.heads == 0,
                "transolver: model.width = " << o.width << " is not divisible by model.heads = "
                                             << o.heads << " (each head takes width / heads)");
  TESSERA_CHECK(o.layers >= 1 && o.layers <= 64, "transolver: layers " << o.layers << " (1 to 64)");
  unsigned seed = o.seed * 7919u;
  auto linear = [&](Index cin, Index cout) {
    return std::shared_ptr<ConvNd>(token_linear(o.nd, cin, cout, o.dtype, o.space, seed++, ""));
  };
  NormOptions norm;
  norm.dtype = o.dtype;
  norm.space = o.space;
  const auto gelu = [] { return std::make_shared<ActivationLayer>(kernels::Activation::GELU); };
  Value x = graph_.input("x");
  Index cin = o.in_channels;
  if (o.coordinates) {
    x = graph_.layer("coords", std::make_shared<CoordinateChannels>(o.nd), x);
    cin += o.nd;
  }
  x = graph_.layer("pre1", linear(cin, 2 * o.width), x);
  x = graph_.layer("pre1.act", gelu(), x);
  x = graph_.layer("pre2", linear(2 * o.width, o.width), x);
  for (int l = 0; l < o.layers; ++l) {
    const std::string b = "block" + std::to_string(l);
    PhysicsAttentionOptions a;
    a.nd = o.nd;
    a.channels = o.width;
    a.heads = o.heads;
    a.head_dim = o.width / o.heads;
    a.slices = o.slices;
    a.dtype = o.dtype;
    a.space = o.space;
    a.seed = seed;
    seed += 3;
    graph_.begin_segment();  // recomputed in backward with Graph::recompute
    Value h = graph_.layer(b + ".ln1", std::make_shared<ChannelLayerNorm>(o.width, norm), x);
    h = graph_.layer(b + ".attn", std::make_shared<PhysicsAttention>(a), h);
    x = graph_.add(b + ".res1", x, h);
    h = graph_.layer(b + ".ln2", std::make_shared<ChannelLayerNorm>(o.width, norm), x);
    h = graph_.layer(b + ".mlp1", linear(o.width, o.mlp_ratio * o.width), h);
    h = graph_.layer(b + ".mlp1.act", gelu(), h);
    h = graph_.layer(b + ".mlp2", linear(o.mlp_ratio * o.width, o.width), h);
    x = graph_.add(b + ".res2", x, h);
    graph_.end_segment();
  }
  x = graph_.layer("head.ln", std::make_shared<ChannelLayerNorm>(o.width, norm), x);
  graph_.output(graph_.layer("head", linear(o.width, o.out_channels), x));
}

std::string Transolver::input_problem(const std::vector<Index>& shape) const {
  std::ostringstream os;
  if (static_cast<int>(shape.size()) != opts_.nd + 2)
    os << "the transolver takes (N, C, " << opts_.nd << " token dims), the data has shape "
       << shape_str(shape);
  else if (shape[1] != opts_.in_channels)
    os << "the transolver takes " << opts_.in_channels << " input channels, the data has "
       << shape[1];
  return os.str();
}

std::string Transolver::signature() const {
  std::ostringstream os;
  os << "transolver nd=" << opts_.nd << " coordinates=" << opts_.coordinates
     << " in=" << opts_.in_channels << " out=" << opts_.out_channels << " width=" << opts_.width
     << " layers=" << opts_.layers << " heads=" << opts_.heads << " slices=" << opts_.slices
     << " mlp_ratio=" << opts_.mlp_ratio << " dtype=" << name_of(opts_.dtype);
  return os.str();
}

}  // namespace tessera
