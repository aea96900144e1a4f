#include "runtime/nn/upsample_layer.hpp"

#include <sstream>

#include "kernels/upsample.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

Upsample::Upsample(UpsampleOptions o)
    : WindowCopyLayer(static_cast<int>(o.scale.size())), opts_(std::move(o)) {
  const std::size_t nd = opts_.scale.size();
  TESSERA_CHECK(nd >= 1 && nd <= 3, "Upsample: scale must give 1 to 3 spatial dims, got " << nd);
  for (std::size_t k = 0; k < nd; ++k)
    TESSERA_CHECK(opts_.scale[k] >= 1, "Upsample: scale of spatial dim "
                                           << k << " is " << opts_.scale[k] << ", must be >= 1");
  TESSERA_CHECK(!opts_.align_corners || opts_.mode == UpsampleOptions::Mode::Linear,
                "Upsample: align_corners applies to linear upsampling only (nearest has no "
                "corners to align, as in PyTorch)");
}

Upsample::~Upsample() = default;

std::string Upsample::name() const {
  std::ostringstream os;
  os << "Upsample" << opts_.scale.size() << "d("
     << (opts_.mode == UpsampleOptions::Mode::Nearest ? "nearest" : "linear")
     << (opts_.align_corners ? ", align_corners" : "") << ")";
  return os.str();
}

ShardSpec Upsample::output_spec(const ShardSpec& in) const {
  const int nd = static_cast<int>(opts_.scale.size());
  check_spatial_spec(in, nd, name());
  std::vector<Index> shape = in.global_shape();
  for (int k = 0; k < nd; ++k) {
    TESSERA_CHECK(shape[2 + k] >= 1, name() << ": spatial dim " << k << " is empty");
    shape[2 + k] *= opts_.scale[k];
  }
  // Aligned: input cell c anchors outputs [c * scale, (c + 1) * scale).
  std::vector<std::function<Index(Index)>> first(in.ndim());
  for (int k = 0; k < nd; ++k) first[2 + k] = [s = opts_.scale[k]](Index c) { return c * s; };
  return window_output_spec(in, shape, opts_.split, first);
}

namespace {
kernels::UpsampleMode kernel_mode(const UpsampleOptions& o) {
  if (o.mode == UpsampleOptions::Mode::Nearest) return kernels::UpsampleMode::Nearest;
  return o.align_corners ? kernels::UpsampleMode::LinearAlignCorners
                         : kernels::UpsampleMode::Linear;
}
}  // namespace

std::vector<HaloReach> Upsample::reach(const ShardSpec& in) const {
  const kernels::UpsampleMode mode = kernel_mode(opts_);
  std::vector<HaloReach> r(static_cast<std::size_t>(in.ndim()), no_reach());
  for (std::size_t k = 0; k < opts_.scale.size() && k + 2 < r.size(); ++k) {
    const Index scale = opts_.scale[k], L = in.global_shape()[2 + k];
    r[2 + k].range = [mode, scale, L](Index lo, Index hi) {
      Index a = 0, b = 0;
      kernels::upsample_input_range(mode, scale, L, lo, hi - lo, &a, &b);
      return std::pair<Index, Index>{a, b};
    };
  }
  return r;
}

void Upsample::forward_window(const Window& w, const Tensor& xw, const Tensor& y) {
  const int nd = static_cast<int>(opts_.scale.size());
  kernels::UpsampleDesc& d = desc_;
  d = kernels::UpsampleDesc{};
  describe_window(d, nd, w, xw);
  d.type = kernel_scalar(xw.dtype(), "Upsample");
  d.mode = kernel_mode(opts_);
  for (int k = 0; k < nd; ++k) d.scale[k] = opts_.scale[k];
  kernels::upsample_forward(xw.device(), d, xw.raw(), y.raw());
}

void Upsample::backward_window(const Tensor& dy, const Tensor& dxw) {
  kernels::UpsampleDesc d = desc_;
  set_x_strides(d, dxw);
  kernels::upsample_backward(dxw.device(), d, dy.raw(), dxw.raw());
}

}  // namespace tessera
