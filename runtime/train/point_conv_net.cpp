#include "runtime/train/point_conv_net.hpp"

#include <sstream>

#include "runtime/nn/conv_layer.hpp"

namespace tessera {

PointConvNet::PointConvNet(const PointConvNetOptions& o) : opts_(o) {
  TESSERA_CHECK(o.in_channels >= 3 && o.pos_offset >= 0 && o.pos_offset + 3 <= o.in_channels,
                "pointconv: the input's " << o.in_channels << " channels must hold x, y, z at "
                                          << o.pos_offset << ".." << o.pos_offset + 2);
  TESSERA_CHECK(
      o.out_channels >= 1 && o.width >= 1 && o.layers >= 1 && o.layers <= 64,
      "pointconv: out " << o.out_channels << ", width " << o.width << ", layers " << o.layers);
  unsigned seed = o.seed * 7919u;
  auto linear = [&](Index cin, Index cout) {
    return std::shared_ptr<ConvNd>(token_linear(1, cin, cout, o.dtype, o.space, seed++, ""));
  };
  const auto shared = std::make_shared<PointNeighbourhoods>();
  const Value x = graph_.input("x");
  Value h = graph_.layer("lift", linear(o.in_channels, o.width), x);
  for (int l = 0; l < o.layers; ++l) {
    const std::string b = "block" + std::to_string(l);
    PointConvOptions p;
    p.in_channels = p.out_channels = o.width;
    p.neighbourhood = o.neighbourhood;
    p.pos_offset = o.pos_offset;
    p.dtype = o.dtype;
    p.space = o.space;
    p.seed = seed++;
    p.neighbourhoods = shared;
    graph_.begin_segment();  // recomputed in backward with Graph::recompute
    const Value c = graph_.op(b + ".conv", std::make_shared<PointConv>(p), {h, x});
    h = graph_.add(b + ".res", h, c);
    graph_.end_segment();
  }
  graph_.output(graph_.layer("head", linear(o.width, o.out_channels), h));
}

std::string PointConvNet::input_problem(const std::vector<Index>& shape) const {
  std::ostringstream os;
  if (shape.size() != 3)
    os << "the point-convolution model takes point clouds (N, C, P), the data has shape "
       << shape_str(shape);
  else if (shape[1] != opts_.in_channels)
    os << "the point-convolution model takes " << opts_.in_channels
       << " input channels, the data has " << shape[1];
  return os.str();
}

std::string PointConvNet::signature() const {
  std::ostringstream os;
  os << "pointconv in=" << opts_.in_channels << " pos=" << opts_.pos_offset
     << " out=" << opts_.out_channels << " width=" << opts_.width << " layers=" << opts_.layers
     << " neighbours=" << opts_.neighbourhood.neighbours << " radius=" << opts_.neighbourhood.radius
     << " dtype=" << name_of(opts_.dtype);
  return os.str();
}

}  // namespace tessera
