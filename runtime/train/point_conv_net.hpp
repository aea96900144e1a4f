#pragma once
// PointConvNet: a point-convolution model for point clouds on the layer graph. The input
// (N, C, P) holds each point's coordinates in channels [pos_offset, pos_offset + 3) among its
// other input channels; every block reads them (the neighbourhoods, found once per batch and
// shared by the blocks) and convolves the running features:
//
//   lift:     token-wise Linear C -> width
//   block{l}: h + PointConv(h; neighbours of the coordinates)   (GELU inside, max reduction)
//   head:     token-wise Linear width -> out
//
// The points may be split over a domain axis in contiguous ranges and the batch over `data`;
// the result equals one rank's at every decomposition.
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "runtime/points/point_conv.hpp"
#include "runtime/train/model.hpp"

namespace tessera {

struct PointConvNetOptions {
  Index in_channels = 4, out_channels = 1;
  int pos_offset = 0;  // channel of x in the input
  Index width = 32;
  int layers = 3;
  NeighbourhoodOptions neighbourhood;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  unsigned seed = 0;
};

class PointConvNet : public Model {
 public:
  explicit PointConvNet(const PointConvNetOptions& opts);

  Graph& graph() override { return graph_; }
  const PointConvNetOptions& options() const { return opts_; }
  std::string input_problem(const std::vector<Index>& shape) const override;
  std::string signature() const override;

 private:
  PointConvNetOptions opts_;
  Graph graph_;
};

}  // namespace tessera
