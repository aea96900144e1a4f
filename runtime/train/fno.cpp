#include "runtime/train/fno.hpp"

#include <sstream>

#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/coordinate_channels.hpp"
#include "runtime/nn/pointwise_layers.hpp"
#include "runtime/spectral/spectral_conv.hpp"

namespace tessera {

Fno::Fno(const FnoOptions& o) : opts_(o) {
  TESSERA_CHECK(o.nd >= 1 && o.nd <= 3, "fno: " << o.nd << " spatial dims (1 to 3 supported)");
  TESSERA_CHECK(o.in_channels >= 1 && o.out_channels >= 1 && o.width >= 1 && o.projection >= 1,
                "fno: channels must be positive (in " << o.in_channels << ", out " << o.out_channels
                                                      << ", width " << o.width << ", projection "
                                                      << o.projection << ")");
  TESSERA_CHECK(o.layers >= 1 && o.layers <= 64, "fno: layers " << o.layers << " (1 to 64)");
  TESSERA_CHECK(o.modes.size() == 1 || static_cast<int>(o.modes.size()) == o.nd,
                "fno: modes needs 1 or " << o.nd << " values, not " << o.modes.size());
  modes_ = o.modes.size() == 1 ? std::vector<Index>(static_cast<std::size_t>(o.nd), o.modes[0])
                               : o.modes;
  for (Index m : modes_) TESSERA_CHECK(m >= 1, "fno: modes must be at least 1, not " << m);
  unsigned seed = o.seed * 7919u;
  auto pointwise = [&](Index cin, Index cout) {
    return std::shared_ptr<ConvNd>(token_linear(o.nd, cin, cout, o.dtype, o.space, seed++, ""));
  };
  Value x = graph_.layer("coords", std::make_shared<CoordinateChannels>(o.nd), graph_.input("x"));
  x = graph_.layer("lift", pointwise(o.in_channels + o.nd, o.width), x);
  for (int l = 0; l < o.layers; ++l) {
    const std::string b = "block" + std::to_string(l);
    SpectralConvOptions s;
    s.nd = o.nd;
    s.in_channels = s.out_channels = o.width;
    s.modes = modes_;
    s.dtype = o.dtype;
    s.space = o.space;
    s.seed = seed++;
    s.shard_weights = o.mode_sharded;
    graph_.begin_segment();  // recomputed in backward with Graph::recompute
    const Value spectral = graph_.layer(b + ".spectral", std::make_shared<SpectralConv>(s), x);
    const Value bypass = graph_.layer(b + ".bypass", pointwise(o.width, o.width), x);
    x = graph_.add(b + ".sum", spectral, bypass);
    if (l + 1 < o.layers)
      x = graph_.layer(b + ".act", std::make_shared<ActivationLayer>(o.activation), x);
    graph_.end_segment();
  }
  x = graph_.layer("proj1", pointwise(o.width, o.projection), x);
  x = graph_.layer("proj1.act", std::make_shared<ActivationLayer>(o.activation), x);
  graph_.output(graph_.layer("proj2", pointwise(o.projection, o.out_channels), x));
}

std::string Fno::input_problem(const std::vector<Index>& shape) const {
  std::ostringstream os;
  if (static_cast<int>(shape.size()) != opts_.nd + 2) {
    os << "the FNO takes (N, C, " << opts_.nd << " spatial dims), the data has shape "
       << shape_str(shape);
    return os.str();
  }
  if (shape[1] != opts_.in_channels) {
    os << "the FNO takes " << opts_.in_channels << " input channels, the data has " << shape[1];
    return os.str();
  }
  return fno_modes_problem(modes_, shape, 2);
}

std::string fno_modes_problem(const std::vector<Index>& modes, const std::vector<Index>& shape,
                              int first_spatial) {
  const int nd = static_cast<int>(shape.size()) - first_spatial;
  for (int d = 0; d < nd; ++d) {
    const std::size_t k = static_cast<std::size_t>(first_spatial + d);
    const Index n = shape[k], m = modes[modes.size() == 1 ? 0 : static_cast<std::size_t>(d)];
    // m > n first: 2 * m of a huge m would overflow into a small "need".
    const Index need = m > n ? m : d + 1 == nd ? 2 * (m - 1) : 2 * m;
    if (m > n || n < need) {
      std::ostringstream os;
      // Spatial dims counted from 0 and the grid alone, whatever shape was given (training
      // checks the grid, inference the (N, C, grid) input): one wording for both.
      const std::vector<Index> grid(shape.begin() + first_spatial, shape.end());
      os << "spatial extent " << n << " (spatial dim " << d << " of the grid " << shape_str(grid)
         << ") is too small for " << m << " Fourier modes (";
      if (m > n)
        os << "more modes than points)";
      else
        os << "needs at least " << need << ")";
      return os.str();
    }
  }
  return "";
}

std::string Fno::signature() const {
  std::ostringstream os;
  os << "fno nd=" << opts_.nd << " in=" << opts_.in_channels << " out=" << opts_.out_channels
     << " width=" << opts_.width << " layers=" << opts_.layers << " modes=";
  for (std::size_t d = 0; d < modes_.size(); ++d) os << (d ? "x" : "") << modes_[d];
  os << " projection=" << opts_.projection << " activation=" << kernels::name_of(opts_.activation)
     << " dtype=" << name_of(opts_.dtype);
  return os.str();
}

}  // namespace tessera
