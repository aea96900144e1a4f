#include "apps/common/data.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <sstream>

#include "io/finite.hpp"
#include "io/pieces.hpp"
#include "io/schema.hpp"
#include "io/sharded.hpp"
#include "runtime/comm/axes_comm.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/state_dict.hpp"

namespace tessera::app {
namespace {

// f(channel, value&) over every element of an (N, C, ...) host tensor: contiguous, or a
// view such as the interior of a buffer with ghost room (walked row by row of the last dim).
template <class F>
void for_each_value(const Tensor& t, F&& f) {
  if (t.numel() == 0) return;
  const int nd = t.ndim();
  TESSERA_CHECK(nd >= 2, "normalization of a tensor of rank " << nd << ": (N, C, ...) expected");
  const std::vector<Index>& sh = t.shape();
  const std::vector<Index>& st = t.strides();
  auto run = [&](auto* p) {
    std::vector<Index> idx(static_cast<std::size_t>(nd), 0);
    const Index len = sh.back(), step = st.back();
    for (;;) {
      Index off = 0;
      for (int d = 0; d + 1 < nd; ++d)
        off += idx[static_cast<std::size_t>(d)] * st[static_cast<std::size_t>(d)];
      auto* row = p + off;
      for (Index e = 0; e < len; ++e) f(nd == 2 ? e : idx[1], row[e * step]);
      int d = nd - 2;
      for (; d >= 0; --d) {
        if (++idx[static_cast<std::size_t>(d)] < sh[static_cast<std::size_t>(d)]) break;
        idx[static_cast<std::size_t>(d)] = 0;
      }
      if (d < 0) break;
    }
  };
  if (t.dtype() == DType::f64)
    run(t.data<double>());
  else
    run(t.data<float>());
}

}  // namespace

GridLayout GridLayout::of(const Mesh& mesh, int spatial_dims) {
  GridLayout g;
  for (int a = 0; a < mesh.ndim(); ++a) {
    if (mesh.names()[static_cast<std::size_t>(a)] == "data")
      g.data_axis = a;
    else
      g.domain_axes.push_back(a);
  }
  TESSERA_CHECK(static_cast<int>(g.domain_axes.size()) <= spatial_dims,
                "mesh " << mesh.str() << " has " << g.domain_axes.size()
                        << " domain axes for data with " << spatial_dims << " spatial dims");
  return g;
}

std::vector<Placement> GridLayout::dims(int spatial_dims, bool shard_batch) const {
  std::vector<Placement> d(static_cast<std::size_t>(spatial_dims) + 2, Replicate());
  if (shard_batch && data_axis >= 0) d[0] = Shard(data_axis);
  for (std::size_t k = 0; k < domain_axes.size(); ++k) d[k + 2] = Shard(domain_axes[k]);
  return d;
}

Index FieldSet::total_channels() const {
  Index c = 0;
  for (Index x : channels) c += x;
  return c;
}

void Normalizer::apply(const Tensor& t) const {
  if (identity()) return;
  for_each_value(t, [&](Index k, auto& v) { v = applied(k, v); });
}

void Normalizer::invert(const Tensor& t) const {
  if (identity()) return;
  for_each_value(t, [&](Index k, auto& v) {
    using T = std::remove_reference_t<decltype(v)>;
    v = static_cast<T>(v * std[static_cast<std::size_t>(k)] + mean[static_cast<std::size_t>(k)]);
  });
}

void Normalizer::invert_snapping_zero(const Tensor& t) const {
  if (identity()) return;
  for_each_value(t, [&](Index k, auto& v) {
    using T = std::remove_reference_t<decltype(v)>;
    const double m = mean[static_cast<std::size_t>(k)], s = std[static_cast<std::size_t>(k)];
    const double raw = static_cast<double>(v) * s + m;
    const double noise =
        4.0 * static_cast<double>(std::numeric_limits<T>::epsilon()) * (std::abs(m) + std::abs(s));
    v = std::abs(raw) <= noise ? T(0) : static_cast<T>(raw);
  });
}

namespace {

// The collective verdict of a finite check of values read from f: a failure on any rank throws
// on every rank, first asking whether the file changed (a file cut short under a reader reads
// as junk: that is what to say, not bad data).
void check_read_finite(const io::File& f, bool ok, const std::string& why) {
  try {
    collective_check(f.comm(), ok, why);
  } catch (const Error&) {  // on every rank alike
    f.check_unchanged();
    throw;
  }
}

// A point quantity: "coords" or a variable of /points/features; false if the file has no
// point cloud or no such variable.
bool point_quantity(const io::File& f, const std::string& n, FieldSet& fs) {
  if (!f.exists(io::schema::kCoords)) return false;
  if (n == "coords") {
    fs.names.push_back(n);
    fs.channels.push_back(3);
    fs.feature.push_back(-1);
    return true;
  }
  if (!f.exists(io::schema::kFeatures)) return false;
  const std::vector<std::string> vars = f.attr_strings(io::schema::kFeatures, "variables");
  for (std::size_t k = 0; k < vars.size(); ++k)
    if (vars[k] == n) {
      fs.names.push_back(n);
      fs.channels.push_back(1);
      fs.feature.push_back(static_cast<Index>(k));
      return true;
    }
  return false;
}

// Whether /points/features names `n` among its variables.
bool has_variable(const io::File& f, const std::string& n) {
  try {
    const std::vector<std::string> vars = f.attr_strings(io::schema::kFeatures, "variables");
    return std::find(vars.begin(), vars.end(), n) != vars.end();
  } catch (const Error&) {
    return false;  // no such attribute: the schema's validation says so
  }
}

}  // namespace

FieldSet field_set(const io::File& f, const std::vector<std::string>& names) {
  FieldSet fs;
  TESSERA_CHECK(!names.empty(), "no fields given for " << f.path());
  for (const std::string& n : names) {
    const std::string dset = std::string(io::schema::kFields) + "/" + n;
    if (!f.exists(dset) && point_quantity(f, n, fs)) {
      TESSERA_CHECK(fs.names.size() == 1 || fs.points,
                    "'" << n << "' is a point quantity of " << f.path() << ", '" << fs.names[0]
                        << "' a grid field: a model reads one or the other");
      fs.points = true;
      continue;
    }
    TESSERA_CHECK(n != "coords" || f.exists(dset),
                  "'coords' (the points' coordinates) not found: no "
                      << f.where(io::schema::kCoords)
                      << " (tessera-prep inspect lists the fields)");
    TESSERA_CHECK(f.exists(io::schema::kCoords) || !f.exists(io::schema::kFeatures) ||
                      f.exists(dset) || !has_variable(f, n),
                  "'" << n << "' is a variable of " << f.where(io::schema::kFeatures)
                      << ", but the file has no " << io::schema::kCoords
                      << ": a point cloud needs its coordinates");
    TESSERA_CHECK(f.exists(dset), "field '"
                                      << n << "' not found: no " << f.where(dset)
                                      << (f.exists(io::schema::kCoords)
                                              ? ", and not 'coords' or a /points/features variable"
                                              : "")
                                      << " (tessera-prep inspect lists the fields)");
    TESSERA_CHECK(!fs.points, "'" << n << "' is a grid field of " << f.path() << ", '"
                                  << fs.names[0]
                                  << "' a point quantity: a model reads one or "
                                     "the other");
    const io::DatasetInfo info = f.info(dset);
    TESSERA_CHECK(info.shape.size() >= 3 && info.shape.size() <= 5,
                  f.where(dset) << " has shape " << shape_str(info.shape)
                                << ", a grid field is (N, C, spatial...) with 1 to 3 spatial dims");
    TESSERA_CHECK(info.dtype == DType::f32,
                  f.where(dset) << " is " << info.type_name << ", the schema's fields are float32");
    fs.names.push_back(n);
    fs.channels.push_back(info.shape[1]);
    fs.feature.push_back(-1);
  }
  return fs;
}

Tensor read_point_quantities(const io::File& f, const FieldSet& fs, Index s0, Index s1, Index b,
                             Index e, DType dtype, bool check_finite) {
  const Index len = e - b, n = s1 - s0, channels = fs.total_channels();
  Tensor cache = Tensor::empty({n, channels, len}, dtype);
  Index c0 = 0;
  for (std::size_t i = 0; i < fs.names.size(); ++i) {
    const bool coords = fs.feature[i] < 0;
    const std::string dset = coords ? io::schema::kCoords : io::schema::kFeatures;
    const Index C = f.info(dset).shape[2];
    const Tensor raw = io::read_slab(f, dset, Box({s0, b, 0}, {s1, e, C}), DType::f32);
    // (n, len, C) channels-last -> channels [c0, c0 + channels of this name) of (n, C, len).
    // Checked as read, this quantity's channels only: a NaN in a variable no model reads
    // stops nothing.
    const Index first = coords ? 0 : fs.feature[i];
    std::string why;
    for (Index s = 0; s < n; ++s)
      for (Index k = 0; k < fs.channels[i]; ++k)
        for (Index p = 0; p < len; ++p) {
          const float v = raw.data<float>()[(s * len + p) * C + first + k];
          if (check_finite && why.empty() && !std::isfinite(v)) {
            std::ostringstream os;
            os << f.where(dset) << ": non-finite value " << v << " of '" << fs.names[i] << "'"
               << (fs.channels[i] > 1 ? " (component " + std::to_string(k) + ")" : "")
               << " in sample " << s0 + s << ", point " << b + p
               << " (tessera-prep validate checks a file for these)";
            why = os.str();
          }
          const Index at = (s * channels + c0 + k) * len + p;
          if (dtype == DType::f64)
            cache.data<double>()[at] = v;
          else
            cache.data<float>()[at] = v;
        }
    if (check_finite) check_read_finite(f, why.empty(), why);
    c0 += fs.channels[i];
  }
  return cache;
}

GridData::GridData(const Mesh& mesh, const std::string& path, const FieldSet& inputs,
                   const FieldSet& targets, DType dtype, Load when, Keep keep)
    : mesh_(mesh),
      path_(path),
      inputs_set_(inputs),
      targets_set_(targets),
      dtype_(dtype),
      keep_(keep) {
  io::File f = io::File::open(path, mesh.comm());
  TESSERA_CHECK(inputs.points == targets.points,
                "'" << path
                    << "': inputs and targets must both be grid fields or both point "
                       "quantities");
  points_ = inputs.points;
  std::vector<Index> shape0;
  if (points_) {  // (N, P, 3) as a grid (N, 0, P)
    const std::vector<Index> s = f.info(io::schema::kCoords).shape;
    shape0 = {s[0], 0, s[1]};
  }
  for (const FieldSet* fs : {&inputs, &targets})
    for (const std::string& n : points_ ? std::vector<std::string>{} : fs->names) {
      const std::string dset = std::string(io::schema::kFields) + "/" + n;
      const io::DatasetInfo info = f.info(dset);
      std::vector<Index> s = info.shape;
      s[1] = 0;
      if (shape0.empty()) shape0 = s;
      TESSERA_CHECK(s == shape0, f.where(dset) << " has shape " << shape_str(info.shape)
                                               << "; the fields differ in N or the grid");
    }
  n_ = shape0[0];
  spatial_.assign(shape0.begin() + 2, shape0.end());
  TESSERA_CHECK(n_ > 0, "'" << path << "': the fields hold 0 samples");
  for (Index e : spatial_)
    TESSERA_CHECK(
        e > 0, "'" << path << "': the fields' grid " << shape_str(spatial_) << " has an empty dim");
  cin_ = inputs.total_channels();
  cout_ = targets.total_channels();
  layout_ = GridLayout::of(mesh, spatial_dims());
  std::vector<Index> gshape = {n_, 1};
  gshape.insert(gshape.end(), spatial_.begin(), spatial_.end());
  const ShardSpec spec(gshape, layout_.dims(spatial_dims(), false), mesh);
  const Box mine = spec.local_box(mesh.coords());
  std::vector<Index> lo, hi;
  for (int d = 0; d < spatial_dims(); ++d)
    lo.push_back(mine.lo[d + 2]), hi.push_back(mine.hi[d + 2]);
  block_ = Box(lo, hi);
  {
    // A scan's run of samples: as many as io::piece_bytes() holds on the rank of the largest
    // block (raw float32 and converted), the same count on every rank.
    const double per_sample = static_cast<double>(cin_ + cout_) *
                              static_cast<double>(block_.volume()) *
                              static_cast<double>(size_of(dtype_) + 4);
    long long run = static_cast<long long>(std::max(
        1.0, std::floor(static_cast<double>(io::piece_bytes()) / std::max(per_sample, 1.0))));
    run = std::min<long long>(run, n_);
    TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, &run, 1, MPI_LONG_LONG, MPI_MIN, mesh.comm()));
    stream_run_ = static_cast<Index>(run);
  }
  if (when == Load::Now) load(std::move(f));
}

GridData::~GridData() = default;

void GridData::load() {
  load(io::File::open(path_, mesh_.comm()));
}

void GridData::load(io::File f) {
  TESSERA_CHECK(!loaded_, "GridData: '" << path_ << "' is loaded already");
  if (keep_ == Keep::Stream) {
    file_ = std::make_unique<io::File>(std::move(f));
  } else {
    inputs_ = read_samples(f, true, 0, n_);
    targets_ = read_samples(f, false, 0, n_);
  }
  summarize();  // streamed, the one scan, which also checks every value finite
  (file_ ? *file_ : f).check_unchanged();  // what was read is one version of the file
  loaded_ = true;
}

void GridData::summarize() {
  // Streamed, each run is normalized as read: the summaries are of the file's values.
  TESSERA_CHECK(keep_ == Keep::Memory || (in_norm_.identity() && out_norm_.identity()),
                "GridData: summaries of a stream already normalized");
  in_summary_ = SampleSummaries(n_, cin_);
  out_summary_ = SampleSummaries(n_, cout_);
  for (const bool input : {true, false}) {
    SampleSummaries& sm = input ? in_summary_ : out_summary_;
    for_each_sample(input, all_samples(), stream_run_,
                    [&](std::size_t j, const Tensor& t) { sm.add(static_cast<Index>(j), t); });
  }
}

std::vector<Index> GridData::all_samples() const {
  std::vector<Index> all(static_cast<std::size_t>(n_));
  for (Index i = 0; i < n_; ++i) all[static_cast<std::size_t>(i)] = i;
  return all;
}

std::vector<Index> GridData::local_samples(const std::vector<Index>& samples,
                                           const Box& mine) const {
  const std::vector<Index> local(samples.begin() + mine.lo[0], samples.begin() + mine.hi[0]);
  for (Index i : local)
    TESSERA_CHECK(i >= 0 && i < n_, "batch: sample " << i << " outside [0, " << n_ << ")");
  return local;
}

Tensor GridData::read_samples(const io::File& f, bool input, Index s0, Index s1) const {
  const FieldSet& fs = input ? inputs_set_ : targets_set_;
  if (points_) return app::read_point_quantities(f, fs, s0, s1, block_.lo[0], block_.hi[0], dtype_);
  return read_fields(f, fs, input ? cin_ : cout_, s0, s1);
}

template <class F>
void GridData::for_each_sample(bool input, const std::vector<Index>& samples, Index max_run,
                               F&& f) const {
  const auto sample_of = [](const Tensor& t, Index at) {
    Box one = Box::from_shape(t.shape());
    one.lo[0] = at, one.hi[0] = at + 1;
    return t.view(one);
  };
  if (keep_ == Keep::Memory) {
    const Tensor& cache = input ? inputs_ : targets_;
    for (std::size_t j = 0; j < samples.size(); ++j) f(j, sample_of(cache, samples[j]));
    return;
  }
  const Normalizer& nz = input ? in_norm_ : out_norm_;
  for (std::size_t j = 0; j < samples.size();) {
    std::size_t e = j + 1;  // a run of consecutive samples, at most max_run
    while (e < samples.size() && samples[e] == samples[e - 1] + 1 &&
           static_cast<Index>(e - j) < max_run)
      ++e;
    TESSERA_CHECK(samples[j] >= 0 && samples[e - 1] < n_,
                  "sample " << (samples[j] < 0 ? samples[j] : samples[e - 1]) << " outside [0, "
                            << n_ << ")");
    const Tensor run = read_samples(*file_, input, samples[j], samples[e - 1] + 1);
    nz.apply(run);
    for (std::size_t k = j; k < e; ++k) f(k, sample_of(run, static_cast<Index>(k - j)));
    j = e;
  }
}

void GridData::require_loaded() const {
  TESSERA_CHECK(loaded_, "GridData: '" << path_ << "' is not loaded yet (load())");
}

double GridData::cache_bytes() const {
  const Index held = keep_ == Keep::Stream ? stream_run_ : n_;  // the cache, or a scan's run
  return static_cast<double>(held) * static_cast<double>(cin_ + cout_) *
             static_cast<double>(block_.volume()) * static_cast<double>(size_of(dtype_)) +
         SampleSummaries::bytes_for(n_, cin_ + cout_);
}

Tensor GridData::read_fields(const io::File& f, const FieldSet& fs, Index channels, Index s0,
                             Index s1) const {
  const Index n = s1 - s0;
  std::vector<Index> shape = {n, channels};
  for (int d = 0; d < spatial_dims(); ++d) shape.push_back(block_.extent(d));
  Tensor cache = Tensor::empty(shape, dtype_);
  Index c0 = 0;
  for (std::size_t i = 0; i < fs.names.size(); ++i) {
    const Index c = fs.channels[i];
    std::vector<Index> lo = {s0, 0}, hi = {s1, c};
    for (int d = 0; d < spatial_dims(); ++d) lo.push_back(block_.lo[d]), hi.push_back(block_.hi[d]);
    const std::string dset = std::string(io::schema::kFields) + "/" + fs.names[i];
    const Tensor raw = io::read_slab(f, dset, Box(lo, hi), DType::f32);
    // Checked as loaded: one NaN in the data would make every loss after it NaN.
    const Index bad = io::first_nonfinite(raw);
    std::string why;
    if (bad >= 0) {
      const Index per_sample = raw.numel() / n;
      std::ostringstream os;
      os << f.where(dset) << ": non-finite value " << raw.data<float>()[bad] << " in sample "
         << s0 + bad / per_sample << " (tessera-prep validate checks a file for these)";
      why = os.str();
    }
    check_read_finite(f, bad < 0, why);
    const Tensor part = host_converted(raw, dtype_);
    std::vector<Index> clo(shape.size(), 0), chi = shape;
    clo[1] = c0;
    chi[1] = c0 + c;
    cache.view(Box(clo, chi)).copy_from(part);
    c0 += c;
  }
  return cache;
}

bool GridData::normalized_all(bool input, Index s, bool zero) const {
  const SampleSummaries& sm = input ? in_summary_ : out_summary_;
  const Normalizer& nz = input ? in_norm_ : out_norm_;
  // Zero and finite are intervals, and the normalization is monotone (its roundings too):
  // every value is in one iff the least and the greatest are.
  const auto holds = [&](auto x, Index k, double v) {
    const auto y = nz.applied(k, static_cast<decltype(x)>(v));
    return zero ? y == 0 : std::isfinite(y);
  };
  for (Index k = 0; k < sm.channels(); ++k) {
    const ValueSummary& m = sm.of(s, k);
    if (m.count == 0) continue;  // no cell here
    const bool ok = dtype_ == DType::f64 ? holds(0.0, k, m.lo) && holds(0.0, k, m.hi)
                                         : holds(0.0f, k, m.lo) && holds(0.0f, k, m.hi);
    if (!ok) return false;
  }
  return true;
}

std::vector<Index> GridData::zero_targets(const std::vector<Index>& samples) const {
  require_loaded();
  std::vector<int> nonzero(samples.size(), 0);
  for (std::size_t j = 0; j < samples.size(); ++j) {
    TESSERA_CHECK(samples[j] >= 0 && samples[j] < n_,
                  "sample " << samples[j] << " outside [0, " << n_ << ")");
    nonzero[j] = !normalized_all(false, samples[j], true);
  }
  // Zero everywhere on every rank (replicas over the data axis agree).
  TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, nonzero.data(), static_cast<int>(nonzero.size()), MPI_INT,
                            MPI_MAX, mesh_.comm()));
  std::vector<Index> out;
  for (std::size_t j = 0; j < samples.size(); ++j)
    if (!nonzero[j]) out.push_back(samples[j]);
  return out;
}

Normalizer GridData::statistics(bool input, const std::vector<Index>& samples) const {
  require_loaded();
  const AxesComm group(mesh_, layout_.domain_axes);
  return normalizer_from((input ? in_summary_ : out_summary_).over(samples, group.comm()));
}

Normalizer normalizer_from(const std::vector<ValueSummary>& channels) {
  Normalizer nz;
  for (const ValueSummary& m : channels) {
    TESSERA_CHECK(m.count > 0, "normalization statistics over no cells");
    // One value throughout: exactly it, so the channel normalizes to exactly 0 (rounding
    // noise over a tiny std would not be 0).
    const double sd = m.lo == m.hi ? 0.0 : std::sqrt(m.m2 / m.count);
    nz.mean.push_back(m.lo == m.hi ? m.lo : m.mean + m.mean_lo);
    nz.std.push_back(sd > 0 ? sd : 1.0);
  }
  return nz;
}

void GridData::normalize(const Normalizer& in, const Normalizer& out) {
  require_loaded();
  in_norm_ = in;
  out_norm_ = out;
  if (keep_ == Keep::Memory) {  // the cache in place; streamed, each batch as it is read
    in.apply(inputs_);
    out.apply(targets_);
  }
  check_normalized_finite();
}

void GridData::check_normalized_finite() const {
  // Finite in the file, past the element type once normalized ((3e38 - mean) / std in
  // float32): said now, naming the sample, not as a NaN loss or a layer's complaint later.
  for (const bool input : {true, false}) {
    Index bad = -1;
    for (Index s = 0; s < n_ && bad < 0; ++s)
      if (!normalized_all(input, s, false)) bad = s;
    std::ostringstream os;
    if (bad >= 0)
      os << "the " << (input ? "inputs" : "targets") << " of sample " << bad
         << " leave the range of " << name_of(dtype_)
         << " once normalized (a finite value in the file far from the data's mean)";
    collective_check(mesh_.comm(), bad < 0, os.str());
  }
}

void GridData::renormalize(const Normalizer& to_in, const Normalizer& to_out) {
  require_loaded();
  if (keep_ == Keep::Stream) {  // the file's values, normalized the new way
    normalize(to_in, to_out);
    return;
  }
  // The cache read again from the file in runs, each normalized the new way over its old
  // values: undoing the old normalization would round twice (and differ from a streamed run).
  const io::File f = io::File::open(path_, mesh_.comm());
  for (const bool input : {true, false}) {
    Tensor& cache = input ? inputs_ : targets_;
    for (Index s0 = 0; s0 < n_; s0 += stream_run_) {
      const Index s1 = std::min(n_, s0 + stream_run_);
      const Tensor run = read_samples(f, input, s0, s1);
      Box part = Box::from_shape(cache.shape());
      part.lo[0] = s0, part.hi[0] = s1;
      cache.view(part).copy_from(run);
    }
  }
  f.check_unchanged();
  summarize();  // of the values now cached, should the file have changed since load()
  normalize(to_in, to_out);
}

Tensor GridData::gather(bool input, const std::vector<Index>& samples, const Box& mine) const {
  const std::vector<Index> local = local_samples(samples, mine);
  std::vector<Index> shape = {static_cast<Index>(local.size()), input ? cin_ : cout_};
  for (int d = 0; d < spatial_dims(); ++d) shape.push_back(block_.extent(d));
  Tensor out = Tensor::empty(shape, dtype_);
  const std::size_t per = static_cast<std::size_t>(shape[1] * block_.volume()) * size_of(dtype_);
  for_each_sample(input, local, 1, [&](std::size_t j, const Tensor& t) {
    std::memcpy(static_cast<char*>(out.raw()) + j * per, t.raw(), per);
  });
  return out;
}

std::pair<ShardSpec, ShardSpec> GridData::batch_specs(Index b) const {
  const bool shard = layout_.data_axis >= 0 && b % mesh_.dim(layout_.data_axis) == 0;
  const auto dims = layout_.dims(spatial_dims(), shard);
  std::vector<Index> xs = {b, cin_}, ys = {b, cout_};
  xs.insert(xs.end(), spatial_.begin(), spatial_.end());
  ys.insert(ys.end(), spatial_.begin(), spatial_.end());
  return {ShardSpec(xs, dims, mesh_), ShardSpec(ys, dims, mesh_)};
}

std::pair<ShardTensor, ShardTensor> GridData::batch(const std::vector<Index>& samples,
                                                    MemSpace space,
                                                    const HaloWidths& x_room) const {
  require_loaded();
  const auto [xspec, yspec] = batch_specs(static_cast<Index>(samples.size()));
  const Box mine = xspec.local_box(mesh_.coords());
  // Streamed, the file is read one sample per collective call: every rank makes as many
  // (its share of the batch), whatever its samples.
  const ShardTensor y =
      ShardTensor::unchecked(mesh_, yspec, gather(false, samples, mine).in_space(space));
  ShardTensor x;
  if (x_room.empty()) {
    x = ShardTensor::unchecked(mesh_, xspec, gather(true, samples, mine).in_space(space));
  } else {
    x = ShardTensor::with_room(mesh_, xspec, x_room, dtype_, space);
    if (space == MemSpace::Host) {  // each sample straight into the interior
      for_each_sample(true, local_samples(samples, mine), 1, [&](std::size_t j, const Tensor& t) {
        Box one = Box::from_shape(x.local().shape());
        one.lo[0] = static_cast<Index>(j), one.hi[0] = one.lo[0] + 1;
        x.local().view(one).copy_from(t);
      });
    } else {  // one host-to-device copy of the gathered batch, then into the interior
      x.local().copy_from(gather(true, samples, mine));
    }
  }
  if (keep_ == Keep::Stream) file_->check_unchanged();  // the batch is one version of the file
  return {x, y};
}

}  // namespace tessera::app
