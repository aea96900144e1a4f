// Distributed real FFTs against FFTW's own multi-dim transform of the gathered tensor
// (float64 to 1e-12 relative), with odd and prime extents, on slab (1-D mesh), pencil (2-D
// mesh), every-dim-sharded and domain x data meshes, with and without pruning, in the
// transposed and the input layout; inverse(forward(x)) == x; and the dot-product tests
// <F x, Y> == <x, F* Y> and <F^-1 Y, x> == <Y, (F^-1)* x> of the whole pruned transforms.
#include <fftw3.h>

#include <complex>
#include <random>
#include <sstream>

#include "runtime/spectral/dist_fft.hpp"
#include "runtime/spectral/spectral_slices.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_tensor.hpp"

using namespace tessera;
using cd = std::complex<double>;

namespace {

Tensor random_complex(const std::vector<Index>& shape, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t = Tensor::empty(shape, DType::c128);
  for (Index i = 0; i < t.numel(); ++i) t.data<cd>()[i] = cd(u(rng), u(rng));
  return t;
}

// numpy's rfftn over dims 2.. of a (N, C, spatial...) float64 tensor, by FFTW's own
// multi-dim plan, then the retained modes picked out.
Tensor reference_spectrum(const Tensor& x, const std::vector<Index>& modes, kernels::FftNorm norm) {
  const auto& s = x.shape();
  const int r = x.ndim() - 2;
  std::vector<int> n(s.begin() + 2, s.end());
  std::vector<Index> full_shape = s;
  full_shape.back() = s.back() / 2 + 1;
  Tensor full = Tensor::empty(full_shape, DType::c128);
  Index pts = 1, bins = 1;
  for (int d = 0; d < r; ++d) pts *= n[static_cast<std::size_t>(d)];
  bins = pts / s.back() * (s.back() / 2 + 1);
  Tensor in = x.clone();
  fftw_plan p = fftw_plan_many_dft_r2c(r, n.data(), static_cast<int>(s[0] * s[1]),
                                       in.data<double>(), nullptr, 1, static_cast<int>(pts),
                                       reinterpret_cast<fftw_complex*>(full.data<cd>()), nullptr, 1,
                                       static_cast<int>(bins), FFTW_ESTIMATE);
  fftw_execute(p);
  fftw_destroy_plan(p);
  const double sc = kernels::fft_scale(norm, false, static_cast<double>(pts));
  for (Index i = 0; i < full.numel(); ++i) full.data<cd>()[i] *= sc;
  Tensor out = full;
  for (int d = 0; d < r; ++d) {
    const bool real = d == r - 1;
    const Index m = modes.empty() ? 0 : modes[static_cast<std::size_t>(d)];
    out = spectral::truncate(out.contiguous(), d + 2,
                             kept_extent(n[static_cast<std::size_t>(d)], m, real), real);
  }
  return out.contiguous();
}

// Bitwise equality of two float64 tensors of the same size.
bool same_reals(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return false;
  for (Index i = 0; i < a.numel(); ++i)
    if (a.data<double>()[i] != b.data<double>()[i]) return false;
  return true;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  double m = 0, s = 1e-300;
  for (Index i = 0; i < a.numel(); ++i) {
    m = std::max(m, std::abs(a.data<cd>()[i] - b.data<cd>()[i]));
    s = std::max(s, std::abs(b.data<cd>()[i]));
  }
  return m / s;
}

double real_dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  if (is_complex(a.dtype())) {
    for (Index i = 0; i < a.numel(); ++i)
      s += (std::conj(a.data<cd>()[i]) * b.data<cd>()[i]).real();
  } else {
    for (Index i = 0; i < a.numel(); ++i) s += a.data<double>()[i] * b.data<double>()[i];
  }
  return s;
}

struct Layout {
  Mesh mesh;
  std::vector<Placement> dims;
  std::string what;
};

// The layouts to try for a tensor of rank nd on the ranks of comm.
std::vector<Layout> layouts(MPI_Comm comm, int nd) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<Layout> out;
  const Mesh line = Mesh::line(comm);
  auto with = [&](const Mesh& m, std::vector<std::pair<int, int>> dim_axis, std::string w) {
    std::vector<Placement> p(static_cast<std::size_t>(nd), Replicate());
    for (auto [d, a] : dim_axis) p[static_cast<std::size_t>(d)] = Shard(a);
    out.push_back({m, p, w});
  };
  with(line, {{2, 0}}, "slab on the first spatial dim");
  with(line, {{nd - 1, 0}}, "slab on the real dim");
  const Mesh grid(comm, {P >= 4 && P % 2 == 0 ? P / 2 : P, P >= 4 && P % 2 == 0 ? 2 : 1},
                  {"x", "y"});
  with(grid, {{2, 0}, {3, 1}}, "pencil on the first two spatial dims");
  if (nd == 5) with(grid, {{3, 0}, {4, 1}}, "pencil on the last two spatial dims");
  if (nd == 4) with(grid, {{2, 1}, {3, 0}}, "every spatial dim sharded");
  if (P % 2 == 0) {
    const Mesh dd(comm, {P / 2, 2}, {"domain", "data"});
    with(dd, {{0, 1}, {2, 0}}, "domain x data");
  }
  return out;
}

struct Case {
  std::vector<Index> shape;
  std::vector<Index> modes;
};

const std::vector<Case> kCases = {
    {{2, 3, 7, 10}, {}},          // 2-D, prime and even extents, all modes
    {{1, 2, 11, 9}, {3, 4}},      // 2-D pruned, odd real extent
    {{2, 2, 5, 6, 7}, {}},        // 3-D
    {{1, 3, 9, 8, 5}, {2, 3, 2}}  // 3-D pruned
};

}  // namespace

TEST_CASE("distributed rfftn equals FFTW's serial transform at every layout") {
  for (const Case& c : kCases)
    for (const Layout& l : layouts(test::harness_comm(), static_cast<int>(c.shape.size())))
      for (bool transposed : {true, false}) {
        const ShardSpec spec(c.shape, l.dims, l.mesh);
        FftOptions o;
        o.modes = c.modes;
        if (!transposed)
          for (const Placement& p : l.dims) o.spectrum_axis.push_back(p.axis);
        const DistFft fft(l.mesh, spec, DType::f64, o);
        INFO(l.what << (transposed ? ", transposed spectrum" : ", spectrum in the input layout")
                    << "\n"
                    << fft.describe());
        const Tensor x = test::random_tensor(c.shape, DType::f64, 17);
        const ShardTensor xs = ShardTensor::scatter(l.mesh, x, spec);
        const ShardTensor X = fft.forward(xs);
        MPI_CHECK(X.spec() == fft.spectrum_spec());
        const Tensor got = X.gather_all();
        const Tensor ref = reference_spectrum(x, c.modes, kernels::FftNorm::Backward);
        MPI_CHECK(got.shape() == ref.shape());
        MPI_CHECK(max_rel_diff(got, ref) < 1e-12);
        if (c.modes.empty()) {  // no pruning: the inverse gives x back
          const Tensor back = fft.inverse(X).gather_all();
          double err = 0;
          for (Index i = 0; i < x.numel(); ++i)
            err = std::max(err, std::abs(back.data<double>()[i] - x.data<double>()[i]));
          MPI_CHECK(err < 1e-13);
          MPI_CHECK(max_rel_diff(X.gather_all(), ref) < 1e-12);  // X survived the inverse
          // Consuming a temporary spectrum (it may be overwritten) gives the same result.
          MPI_CHECK(same_reals(fft.inverse(fft.forward(xs), true).gather_all(), back));
        }
      }
}

TEST_CASE("every map is exact against its adjoint, pruned or not") {
  for (const Case& c : kCases)
    for (const Layout& l : layouts(test::harness_comm(), static_cast<int>(c.shape.size()))) {
      const ShardSpec spec(c.shape, l.dims, l.mesh);
      FftOptions o;
      o.modes = c.modes;
      o.norm = kernels::FftNorm::Ortho;
      const DistFft fft(l.mesh, spec, DType::f64, o);
      INFO(l.what << "\n" << fft.describe());
      const Tensor x = test::random_tensor(c.shape, DType::f64, 3);
      const Tensor Y = random_complex(fft.spectrum_spec().global_shape(), 4);
      const ShardTensor xs = ShardTensor::scatter(l.mesh, x, spec);
      const ShardTensor Ys = ShardTensor::scatter(l.mesh, Y, fft.spectrum_spec());
      const double fx_y = real_dot(fft.forward(xs).gather_all(), Y);
      const double x_fty = real_dot(x, fft.forward_adjoint(Ys).gather_all());
      const ShardTensor Ycopy(l.mesh, Ys.spec(), Ys.local().clone());
      MPI_CHECK(same_reals(fft.forward_adjoint(Ycopy, true).gather_all(),
                           fft.forward_adjoint(Ys).gather_all()));
      MPI_CHECK(std::abs(fx_y - x_fty) <= 1e-12 * std::max(1.0, std::abs(fx_y)));
      const double iy_x = real_dot(fft.inverse(Ys).gather_all(), x);
      const double y_itx = real_dot(Y, fft.inverse_adjoint(xs).gather_all());
      MPI_CHECK(std::abs(iy_x - y_itx) <= 1e-12 * std::max(1.0, std::abs(iy_x)));
    }
}

TEST_CASE("normalizations scale as numpy's; float32 agrees with float64") {
  const std::vector<Index> shape{2, 2, 6, 5};
  const Mesh line = Mesh::line(test::harness_comm());
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate()}, line);
  const Tensor x = test::random_tensor(shape, DType::f64, 9);
  for (auto norm :
       {kernels::FftNorm::Backward, kernels::FftNorm::Ortho, kernels::FftNorm::Forward}) {
    FftOptions o;
    o.norm = norm;
    const DistFft fft(line, spec, DType::f64, o);
    const Tensor got = fft.forward(ShardTensor::scatter(line, x, spec)).gather_all();
    MPI_CHECK(max_rel_diff(got, reference_spectrum(x, {}, norm)) < 1e-12);
    const Tensor back = fft.inverse(fft.forward(ShardTensor::scatter(line, x, spec))).gather_all();
    double err = 0;
    for (Index i = 0; i < x.numel(); ++i)
      err = std::max(err, std::abs(back.data<double>()[i] - x.data<double>()[i]));
    MPI_CHECK(err < 1e-13);
  }
  const Tensor xf = test::random_tensor(shape, DType::f32, 9);
  const DistFft f32(line, spec, DType::f32);
  const Tensor got = f32.forward(ShardTensor::scatter(line, xf, spec)).gather_all();
  Tensor x64 = Tensor::empty(shape, DType::f64);
  for (Index i = 0; i < x64.numel(); ++i) x64.data<double>()[i] = xf.data<float>()[i];
  const Tensor ref = reference_spectrum(x64, {}, kernels::FftNorm::Backward);
  double m = 0, s = 0;
  for (Index i = 0; i < ref.numel(); ++i) {
    m = std::max(m, std::abs(cd(got.data<std::complex<float>>()[i]) - ref.data<cd>()[i]));
    s = std::max(s, std::abs(ref.data<cd>()[i]));
  }
  MPI_CHECK(m / s < 1e-5);
}

TEST_CASE("pruning moves fewer bytes; bad inputs are refused with a message") {
  const std::vector<Index> shape{1, 4, 16, 16, 16};
  const Mesh line = Mesh::line(test::harness_comm());
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate(), Replicate()}, line);
  FftOptions pruned;
  pruned.modes = {4, 4, 4};
  const DistFft all(line, spec, DType::f64), some(line, spec, DType::f64, pruned);
  // Only the retained 8 x 4 of 16 x 9 modes travel: 4.5x fewer bytes.
  if (line.size() > 1) MPI_CHECK(some.bytes_moved() * 4 < all.bytes_moved());
  const Tensor x = test::random_tensor(shape, DType::f64, 1);
  const ShardTensor wrong = ShardTensor::scatter(
      line, x,
      ShardSpec(shape, {Replicate(), Replicate(), Replicate(), Shard(0), Replicate()}, line));
  bool refused = false;
  try {
    all.forward(wrong);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("the plan is for") != std::string::npos;
  }
  MPI_CHECK(refused || line.size() == 1);
  bool bad_type = false;
  try {
    DistFft(line, spec, DType::c128);
  } catch (const Error& e) {
    bad_type = std::string(e.what()).find("float32 or float64") != std::string::npos;
  }
  MPI_CHECK(bad_type);
  // Arguments that differ across the ranks (the plans would transpose other boxes: a hang;
  // or scale otherwise: a wrong answer) or are bad on one rank alone: refused on every rank.
  if (line.size() > 1) {
    const bool last = test::world_rank() == line.size() - 1;
    FftOptions other = pruned;
    if (last) other.modes = {4, 4, 3};
    MPI_CHECK_ERROR(DistFft(line, spec, DType::f64, other),
                    "DistFft: ranks disagree on the transform");
    other = FftOptions();
    if (last) other.norm = kernels::FftNorm::Ortho;
    MPI_CHECK_ERROR(DistFft(line, spec, DType::f64, other), "norm=ortho");
    MPI_CHECK_ERROR(DistFft(line, spec, last ? DType::c64 : DType::f64), "float32 or float64");
  }
}

TEST_CASE("stage adjoints: truncation and zero-padding, and each transpose, are exact") {
  // Truncation T keeps [0, m) and [n-m, n) of a complex dim ([0, m) of a real dim's bins);
  // its adjoint is the zero-padding: <T z, y> == <z, T* y>.
  for (bool real : {false, true}) {
    const Index n = 11, kept = real ? 4 : 6;
    const std::vector<Index> full{2, real ? n / 2 + 1 : n, 3};
    const Tensor z = random_complex(full, 5);
    const Tensor tz = spectral::truncate(z, 1, kept, real).contiguous();
    const Tensor y = random_complex(tz.shape(), 6);
    const Tensor ty = spectral::zero_pad(y, 1, n, real);
    MPI_CHECK(std::abs(real_dot(tz, y) - real_dot(z, ty)) < 1e-12);
  }
  // A transpose moves entries between ranks: its adjoint (the reverse move) is its inverse,
  // so <P x, y> == <x, P^-1 y> for every move of a plan.
  const std::vector<Index> shape{1, 2, 6, 5, 7};
  const Mesh line = Mesh::line(test::harness_comm());
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate(), Replicate()}, line);
  const DistFft fft(line, spec, DType::f64);
  for (const FftStage& st : fft.stages()) {
    if (st.kind != FftStage::Kind::Move) continue;
    std::vector<Placement> from(shape.size(), Replicate()), to(shape.size(), Replicate());
    from[static_cast<std::size_t>(st.dim)] = Shard(st.axis);
    to[static_cast<std::size_t>(st.to)] = Shard(st.axis);
    const Tensor x = random_complex(st.shape, 7), y = random_complex(st.shape, 8);
    const ShardTensor px = ShardTensor::scatter(line, x, from).redistribute(to);
    const ShardTensor qy = ShardTensor::scatter(line, y, to).redistribute(from);
    MPI_CHECK(std::abs(real_dot(px.gather_all(), y) - real_dot(x, qy.gather_all())) < 1e-12);
  }
}
