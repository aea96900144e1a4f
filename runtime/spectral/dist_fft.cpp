#include "runtime/spectral/dist_fft.hpp"

#include <sstream>

#include "runtime/spectral/spectral_slices.hpp"

namespace tessera {
namespace {

std::vector<int> placements_of(const ShardSpec& s) {
  std::vector<int> a;
  for (const Placement& p : s.placements()) a.push_back(p.axis);
  return a;
}

// The spec after `st`, from the spec before it (sizes of untouched sharded dims kept).
ShardSpec spec_after(const ShardSpec& before, const FftStage& st) {
  if (st.kind == FftStage::Kind::Move)
    return before.with_placement(st.dim, Replicate()).with_placement(st.to, Shard(st.axis));
  std::vector<std::vector<Index>> sizes(static_cast<std::size_t>(before.ndim()));
  for (int d = 0; d < before.ndim(); ++d)
    if (before.placement(d).sharded()) sizes[static_cast<std::size_t>(d)] = before.sizes(d);
  return ShardSpec(st.shape, before.placements(), before.mesh_dims(), {}, sizes);
}

}  // namespace

DistFft::DistFft(const Mesh& mesh, const ShardSpec& input, DType real, const FftOptions& opts)
    : mesh_(mesh), real_(real), opts_(opts) {
  TESSERA_CHECK(real == DType::f32 || real == DType::f64,
                "DistFft: real input is float32 or float64, not " << name_of(real));
  TESSERA_CHECK(!input.has_partial(),
                "DistFft: input spec " << input.str() << " has a pending sum; resolve it first");
  layout_.shape = input.global_shape();
  layout_.axis = placements_of(input);
  layout_.axis_size = mesh.dims();
  layout_.dims = opts.dims;
  if (layout_.dims.empty())
    for (int d = 2; d < input.ndim(); ++d) layout_.dims.push_back(d);
  TESSERA_CHECK(!layout_.dims.empty(), "DistFft: a tensor of shape "
                                           << shape_str(input.global_shape())
                                           << " has no spatial dims (batch, channel, spatial...)");
  layout_.modes = opts.modes;
  layout_.spectrum_axis = opts.spectrum_axis;
  stages_ = plan_fft_stages(layout_);
  specs_.push_back(input);
  for (const FftStage& st : stages_) specs_.push_back(spec_after(specs_.back(), st));
  for (int d : layout_.dims)
    points_ *= static_cast<double>(input.global_shape()[static_cast<std::size_t>(d)]);
}

ShardTensor DistFft::forward(const ShardTensor& x) const {
  return run_down(x, Pass::Forward);
}
ShardTensor DistFft::inverse_adjoint(const ShardTensor& g) const {
  return run_down(g, Pass::InverseAdjoint);
}
ShardTensor DistFft::inverse(const ShardTensor& X) const {
  return run_up(X, Pass::Inverse);
}
ShardTensor DistFft::forward_adjoint(const ShardTensor& G) const {
  return run_up(G, Pass::ForwardAdjoint);
}

ShardTensor DistFft::run_down(const ShardTensor& x, Pass pass) const {
  TESSERA_CHECK(x.spec() == input_spec(), "DistFft: input is " << x.spec().str()
                                                               << ", the plan is for "
                                                               << input_spec().str());
  TESSERA_CHECK(x.dtype() == real_, "DistFft: input is " << name_of(x.dtype())
                                                         << ", the plan is for " << name_of(real_));
  const bool adj = pass == Pass::InverseAdjoint;
  const double scale = kernels::fft_scale(opts_.norm, adj, points_);
  ShardTensor cur = x;
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    const FftStage& st = stages_[i];
    if (st.kind == FftStage::Kind::Move) {
      cur = cur.redistribute(specs_[i + 1]);
      continue;
    }
    const Tensor in = cur.local().contiguous();
    Tensor out;
    if (st.real) {  // the first transform: the scale goes here, once
      out = spectral::r2c(in, st.dim, scale,
                          adj ? kernels::HalfWeight::DoubleInterior : kernels::HalfWeight::None);
    } else {
      out = spectral::c2c(in, st.dim, -1);
    }
    out = spectral::truncate(out, st.dim, st.kept, st.real);
    cur = ShardTensor::unchecked(mesh_, specs_[i + 1], out);
  }
  return cur;
}

ShardTensor DistFft::run_up(const ShardTensor& X, Pass pass) const {
  TESSERA_CHECK(X.spec() == spectrum_spec(), "DistFft: spectrum is " << X.spec().str()
                                                                     << ", the plan's is "
                                                                     << spectrum_spec().str());
  TESSERA_CHECK(X.dtype() == complex_type(), "DistFft: spectrum is " << name_of(X.dtype())
                                                                     << ", the plan's is "
                                                                     << name_of(complex_type()));
  const bool adj = pass == Pass::ForwardAdjoint;
  const double scale = kernels::fft_scale(opts_.norm, !adj, points_);
  ShardTensor cur = X;
  for (std::size_t i = stages_.size(); i-- > 0;) {
    const FftStage& st = stages_[i];
    if (st.kind == FftStage::Kind::Move) {
      cur = cur.redistribute(specs_[i]);
      continue;
    }
    const Tensor padded = spectral::zero_pad(cur.local().contiguous(), st.dim, st.n, st.real);
    Tensor out;
    if (st.real) {  // the last transform: the scale goes here, once
      out = spectral::c2r(padded, st.dim, st.n, scale,
                          adj ? kernels::HalfWeight::HalveInterior : kernels::HalfWeight::None);
    } else {
      out = spectral::c2c(padded, st.dim, +1);
    }
    cur = ShardTensor::unchecked(mesh_, specs_[i], out);
  }
  return cur;
}

std::string DistFft::describe() const {
  std::ostringstream o;
  o << "distributed FFT over dims";
  for (int d : layout_.dims) o << " " << d;
  o << " on mesh " << mesh_.str() << ", norm " << kernels::name_of(opts_.norm) << "\n"
    << describe_fft_stages(layout_, stages_);
  o << "this rank (" << mesh_.rank() << "):";
  for (const ShardSpec& s : specs_) o << " " << s.local_box(mesh_.coords()).str();
  o << "\nmoves " << bytes_moved() << " bytes per transform\n";
  return o.str();
}

Index DistFft::bytes_moved() const {
  Index bytes = 0;
  bool spectral = false;  // moves before the first (real) transform carry real elements
  for (const FftStage& st : stages_) {
    if (st.kind == FftStage::Kind::Transform) spectral = true;
    if (st.kind != FftStage::Kind::Move) continue;
    bytes += fft_elements_moved(layout_, {st}) *
             static_cast<Index>(size_of(spectral ? complex_type() : real_));
  }
  return bytes;
}

}  // namespace tessera
