#include "runtime/nn/pad_layer.hpp"

#include <sstream>

#include "kernels/pad.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/ops_support.hpp"
#include "runtime/nn/window_layout.hpp"

namespace tessera {

namespace {
// Widths beyond this are certainly mistakes (and their sums could overflow an Index).
constexpr Index kMaxWidth = Index{1} << 48;

kernels::PadMode kernel_mode(PadOptions::Mode m) {
  switch (m) {
    case PadOptions::Mode::Reflect:
      return kernels::PadMode::Reflect;
    case PadOptions::Mode::Replicate:
      return kernels::PadMode::Replicate;
    case PadOptions::Mode::Circular:
      return kernels::PadMode::Circular;
    default:
      return kernels::PadMode::Constant;
  }
}
const char* mode_name(PadOptions::Mode m) {
  switch (m) {
    case PadOptions::Mode::Reflect:
      return "reflect";
    case PadOptions::Mode::Replicate:
      return "replicate";
    case PadOptions::Mode::Circular:
      return "circular";
    default:
      return "constant";
  }
}
}  // namespace

Pad::Pad(PadOptions o) : WindowCopyLayer(static_cast<int>(o.pad_lo.size())), opts_(std::move(o)) {
  const std::size_t nd = opts_.pad_lo.size();
  TESSERA_CHECK(nd >= 1 && nd <= 3, "Pad: pad_lo must give 1 to 3 spatial dims, got " << nd);
  if (opts_.pad_hi.empty()) opts_.pad_hi = opts_.pad_lo;
  TESSERA_CHECK(opts_.pad_hi.size() == nd,
                "Pad: pad_hi gives " << opts_.pad_hi.size() << " dims, pad_lo " << nd);
  for (std::size_t k = 0; k < nd; ++k)
    for (const Index w : {opts_.pad_lo[k], opts_.pad_hi[k]})
      TESSERA_CHECK(w >= -kMaxWidth && w <= kMaxWidth,
                    "Pad: padding " << w << " of spatial dim " << k << " is out of range");
  for (std::size_t k = 0; k < nd; ++k)
    TESSERA_CHECK(
        opts_.mode != PadOptions::Mode::Circular || (opts_.pad_lo[k] >= 0 && opts_.pad_hi[k] >= 0),
        "Pad: circular padding " << opts_.pad_lo[k] << "/" << opts_.pad_hi[k] << " of spatial dim "
                                 << k
                                 << ": negative widths are not supported (PyTorch "
                                    "wraps the cropped tensor there); crop first "
                                    "with a constant Pad");
}

Pad::~Pad() = default;

std::string Pad::name() const {
  std::ostringstream os;
  os << "Pad" << opts_.pad_lo.size() << "d(" << mode_name(opts_.mode) << ")";
  return os.str();
}

ShardSpec Pad::output_spec(const ShardSpec& in) const {
  const int nd = static_cast<int>(opts_.pad_lo.size());
  check_spatial_spec(in, nd, name());
  std::vector<Index> shape = in.global_shape();
  for (int k = 0; k < nd; ++k) {
    const Index L = shape[2 + k];
    TESSERA_CHECK(L >= 1, name() << ": spatial dim " << k << " is empty");
    TESSERA_CHECK(
        opts_.mode != PadOptions::Mode::Reflect || (opts_.pad_lo[k] < L && opts_.pad_hi[k] < L),
        name() << ": spatial dim " << k << ": reflect padding " << opts_.pad_lo[k] << "/"
               << opts_.pad_hi[k] << " must be narrower than the extent " << L
               << " (as in PyTorch)");
    shape[2 + k] = L + opts_.pad_lo[k] + opts_.pad_hi[k];
    // Negative widths crop (F.pad's rule); an empty output is refused, not made.
    TESSERA_CHECK(shape[2 + k] >= 1, name() << ": spatial dim " << k << ": padding "
                                            << opts_.pad_lo[k] << "/" << opts_.pad_hi[k]
                                            << " crops all " << L << " cells");
  }
  // Aligned: input cell c anchors output c + pad_lo (the padding goes to the end blocks;
  // split_output clamps an anchor in the cropped part).
  std::vector<std::function<Index(Index)>> first(in.ndim());
  for (int k = 0; k < nd; ++k)
    first[2 + k] = [plo = opts_.pad_lo[k]](Index c) { return c == 0 ? 0 : c + plo; };
  return window_output_spec(in, shape, opts_.split, first);
}

std::vector<HaloReach> Pad::reach(const ShardSpec& in) const {
  const kernels::PadMode mode = kernel_mode(opts_.mode);
  std::vector<HaloReach> r(static_cast<std::size_t>(in.ndim()), no_reach());
  for (std::size_t k = 0; k < opts_.pad_lo.size() && k + 2 < r.size(); ++k) {
    const Index plo = opts_.pad_lo[k], L = in.global_shape()[2 + k];
    // Circular padding reads the other end's cells as periodic ghosts (the exchange wraps).
    r[2 + k].periodic = mode == kernels::PadMode::Circular;
    r[2 + k].range = [mode, plo, L](Index lo, Index hi) {
      Index a = 0, b = 0;
      kernels::pad_input_range(mode, L, plo, lo, hi - lo, &a, &b);
      // A block of constant padding reads nothing; the halo plan wants a window in the
      // domain: the edge cell beside it (read by no output, so its gradient stays zero).
      if (b <= a) a = lo < plo ? 0 : L - 1, b = a + 1;
      return std::pair<Index, Index>{a, b};
    };
  }
  return r;
}

void Pad::forward_window(const Window& w, const Tensor& xw, const Tensor& y) {
  const int nd = static_cast<int>(opts_.pad_lo.size());
  kernels::PadDesc& d = desc_;
  d = kernels::PadDesc{};
  describe_window(d, nd, w, xw);
  d.type = kernel_scalar(xw.dtype(), "Pad");
  d.mode = kernel_mode(opts_.mode);
  d.value = opts_.value;
  for (int k = 0; k < nd; ++k) {
    d.pad_lo[k] = opts_.pad_lo[k];
    d.pad_hi[k] = opts_.pad_hi[k];
  }
  kernels::pad_forward(y.device(), d, xw.raw(), y.raw());
}

void Pad::backward_window(const Tensor& dy, const Tensor& dxw) {
  kernels::PadDesc d = desc_;
  set_x_strides(d, dxw);
  kernels::pad_backward(dxw.device(), d, dy.raw(), dxw.raw());
}

}  // namespace tessera
