#include "runtime/spectral/dist_fft.hpp"

#include <algorithm>
#include <sstream>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/comm_timers.hpp"
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
  for (int d = 0; d < before.ndim(); ++d)  // the transformed dim is whole (an axis of 1 rank)
    if (before.placement(d).sharded() && d != st.dim)
      sizes[static_cast<std::size_t>(d)] = before.sizes(d);
  return ShardSpec(st.shape, before.placements(), before.mesh_dims(), {}, sizes);
}

}  // namespace

FftPlan plan_dist_fft(const ShardSpec& input, const FftOptions& opts) {
  TESSERA_CHECK(!input.has_partial(),
                "DistFft: input spec " << input.str() << " has a pending sum; resolve it first");
  FftPlan p;
  p.layout.shape = input.global_shape();
  p.layout.axis = placements_of(input);
  p.layout.axis_size = input.mesh_dims();
  p.layout.dims = opts.dims;
  if (p.layout.dims.empty())
    for (int d = 2; d < input.ndim(); ++d) p.layout.dims.push_back(d);
  TESSERA_CHECK(!p.layout.dims.empty(), "DistFft: a tensor of shape "
                                            << shape_str(input.global_shape())
                                            << " has no spatial dims (batch, channel, spatial...)");
  p.layout.modes = opts.modes;
  p.layout.spectrum_axis = opts.spectrum_axis;
  p.stages = plan_fft_stages(p.layout);
  p.specs.push_back(input);
  for (const FftStage& st : p.stages) p.specs.push_back(spec_after(p.specs.back(), st));
  return p;
}

namespace {

// What every rank must pass alike: plans made from other arguments would transpose other
// boxes (a hang in the all-to-all, or garbled data) or scale by another norm (a wrong answer).
std::string plan_arguments(const ShardSpec& input, DType real, const FftOptions& o) {
  std::ostringstream s;
  auto list = [&s](const char* name, const auto& v) {
    s << ' ' << name << '=';
    for (std::size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  };
  s << input.str() << ' ' << name_of(real);
  list("dims", o.dims);
  list("modes", o.modes);
  s << " norm=" << kernels::name_of(o.norm);
  list("spectrum_axis", o.spectrum_axis);
  s << " transport=" << name_of(o.transport);
  return s.str();
}

}  // namespace

DistFft::DistFft(const Mesh& mesh, const ShardSpec& input, DType real, const FftOptions& opts)
    : mesh_(mesh), real_(real), opts_(opts) {
  // Collective (one all-reduce): arguments refused on one rank, or unequal across the ranks,
  // are refused on every rank here rather than hanging the first transpose.
  FftPlan p;
  std::string why;
  try {
    TESSERA_CHECK(real == DType::f32 || real == DType::f64,
                  "DistFft: real input is float32 or float64, not " << name_of(real));
    TESSERA_CHECK(input.mesh_dims() == mesh.dims(),
                  "DistFft: input spec " << input.str() << " is not of this mesh");
    p = plan_dist_fft(input, opts);
  } catch (const std::exception& e) {
    why = e.what();
  }
  collective_check(mesh.comm(), why.empty(), why, "DistFft", "the transform",
                   plan_arguments(input, real, opts));
  layout_ = std::move(p.layout);
  stages_ = std::move(p.stages);
  specs_ = std::move(p.specs);
  group_stages();
  for (int d : layout_.dims)
    points_ *= static_cast<double>(input.global_shape()[static_cast<std::size_t>(d)]);
}

void DistFft::group_stages() {
  const std::size_t n = stages_.size();
  group_first_.assign(n, 0);
  group_last_.assign(n, 0);
  auto whole = [](const FftStage& s) { return s.kept == (s.real ? s.n / 2 + 1 : s.n); };
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    if (stages_[i].kind == FftStage::Kind::Transform)
      while (j + 1 < n && stages_[j + 1].kind == FftStage::Kind::Transform && whole(stages_[j]) &&
             !stages_[j + 1].real)
        ++j;
    // A multi-dim real transform halves its highest dim: the real dim must be it.
    if (stages_[i].real)
      for (std::size_t k = i + 1; k <= j; ++k)
        if (stages_[k].dim > stages_[i].dim) j = i;
    for (std::size_t k = i; k <= j; ++k) {
      group_first_[k] = i;
      group_last_[k] = j;
    }
    i = j + 1;
  }
}

std::vector<int> DistFft::group_dims(std::size_t i) const {
  std::vector<int> dims;
  for (std::size_t k = group_first_[i]; k <= group_last_[i]; ++k) dims.push_back(stages_[k].dim);
  std::sort(dims.begin(), dims.end());
  return dims;
}

ShardTensor DistFft::forward(const ShardTensor& x) const {
  return run_down(x, Pass::Forward);
}
ShardTensor DistFft::inverse_adjoint(const ShardTensor& g) const {
  return run_down(g, Pass::InverseAdjoint);
}
ShardTensor DistFft::inverse(const ShardTensor& X, bool consume) const {
  return run_up(X, Pass::Inverse, consume);
}
ShardTensor DistFft::forward_adjoint(const ShardTensor& G, bool consume) const {
  return run_up(G, Pass::ForwardAdjoint, consume);
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
      ScopedCommTimer timer(comm_times().alltoall_s);
      cur = cur.redistribute(specs_[i + 1], opts_.transport);
      continue;
    }
    // A run of transforms at once; only its last stage may truncate.
    const std::size_t last = group_last_[i];
    const std::vector<int> dims = group_dims(i);
    const Tensor in = cur.local().contiguous();
    Tensor out;
    if (st.real) {  // the first transform: the scale goes here, once
      out = spectral::r2c_dims(
          in, dims, scale, adj ? kernels::HalfWeight::DoubleInterior : kernels::HalfWeight::None);
    } else {  // the input is a spectrum this pass made (the real transform came first)
      out = spectral::c2c_dims(in, dims, -1, !in.same_storage(x.local()));
    }
    out = spectral::truncate(out, stages_[last].dim, stages_[last].kept, stages_[last].real);
    cur = ShardTensor::unchecked(mesh_, specs_[last + 1], out);
    i = last;
  }
  return cur;
}

ShardTensor DistFft::run_up(const ShardTensor& X, Pass pass, bool consume) const {
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
      ScopedCommTimer timer(comm_times().alltoall_s);
      cur = cur.redistribute(specs_[i], opts_.transport);
      continue;
    }
    // A run of transforms at once (the last stage of the run is the one truncated).
    const std::size_t first = group_first_[i];
    const FftStage& head = stages_[first];
    const std::vector<int> dims = group_dims(i);
    const Tensor padded = spectral::zero_pad(cur.local().contiguous(), st.dim, st.n, st.real);
    // Temporaries of this pass are transformed in place; the caller's spectrum only when
    // the caller gave it up.
    const bool owned = consume || !padded.same_storage(X.local());
    Tensor out;
    if (head.real) {  // the last transform: the scale goes here, once
      out = spectral::c2r_dims(padded, dims, head.n, scale,
                               adj ? kernels::HalfWeight::HalveInterior : kernels::HalfWeight::None,
                               owned);
    } else {
      out = spectral::c2c_dims(padded, dims, +1, owned);
    }
    cur = ShardTensor::unchecked(mesh_, specs_[first], out);
    i = first;
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
