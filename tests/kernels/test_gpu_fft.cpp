// The CUDA spectral path against the host: cuFFT r2c / c2r / c2c along every dim of
// (outer, n, inner) blocks with odd and prime lengths, scales and Hermitian weights,
// float32 and float64; the per-mode mixing products (own kernel and cuBLAS GEMMs); and the
// distributed FFT and SpectralConv on CUDA tensors against the same on host tensors. Skips
// without a device.
#include <complex>
#include <random>
#include <vector>

#include "kernels/fft.hpp"
#include "kernels/spectral_mix.hpp"
#include "runtime/spectral/dist_fft.hpp"
#include "runtime/spectral/spectral_conv.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/have_device.hpp"
#include "tests/support/layer_check.hpp"
#include "tests/support/random_values.hpp"

using namespace tessera;
using namespace tessera::kernels;

namespace {

template <class T>
std::vector<T> on_device_and_back(const std::vector<T>& in, std::size_t out_count,
                                  const std::function<void(const void*, void*)>& run) {
  void* din = device::alloc(std::max<std::size_t>(1, in.size() * sizeof(T)));
  void* dout = device::alloc(std::max<std::size_t>(1, out_count * sizeof(T)));
  device::copy(din, in.data(), in.size() * sizeof(T), device::Copy::HostToDevice);
  run(din, dout);
  device::synchronize(Device::cuda());
  std::vector<T> out(out_count);
  device::copy(out.data(), dout, out_count * sizeof(T), device::Copy::DeviceToHost);
  device::free(din);
  device::free(dout);
  return out;
}

template <class R>
double rel_diff(const std::vector<R>& a, const std::vector<R>& b) {
  double m = 0, s = 1e-300;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    s = std::max(s, std::abs(static_cast<double>(b[i])));
  }
  return m / s;
}

template <class R>
void check_block(const FftBlock& b) {
  const DType real = std::is_same_v<R, double> ? DType::f64 : DType::f32;
  const DType cplx = complex_of(real);
  const double tol = std::is_same_v<R, double> ? 1e-12 : 2e-5;
  const std::size_t nr = static_cast<std::size_t>(b.outer * b.n * b.inner);
  const std::size_t nc = static_cast<std::size_t>(b.outer * b.bins() * b.inner);
  // r2c with a scale and doubled interior (reals viewed as interleaved complex after).
  const auto x = test::random_values<R>(nr, 1);
  std::vector<R> host_z(2 * nc);
  fft_r2c(Device::host(), real, b, x.data(), host_z.data(), 0.5, HalfWeight::DoubleInterior);
  std::vector<R> xin(x);
  xin.resize(std::max(nr, 2 * nc));
  const auto dev_z = on_device_and_back<R>(xin, 2 * nc, [&](const void* i, void* o) {
    fft_r2c(Device::cuda(), real, b, i, o, 0.5, HalfWeight::DoubleInterior);
  });
  MPI_CHECK(rel_diff(dev_z, host_z) < tol);
  // c2r with halved interior; the input must survive on both.
  const auto z = test::random_values<R>(2 * nc, 2);
  std::vector<R> host_x(nr);
  fft_c2r(Device::host(), real, b, z.data(), host_x.data(), 0.25, HalfWeight::HalveInterior);
  std::vector<R> zin(z);
  zin.resize(std::max(2 * nc, nr));
  const auto dev_x = on_device_and_back<R>(zin, nr, [&](const void* i, void* o) {
    fft_c2r(Device::cuda(), real, b, i, o, 0.25, HalfWeight::HalveInterior);
  });
  MPI_CHECK(rel_diff(dev_x, host_x) < tol);
  // c2c both signs.
  for (int sign : {-1, 1}) {
    const auto c = test::random_values<R>(2 * nr, 3);
    std::vector<R> host_c(2 * nr);
    fft_c2c(Device::host(), cplx, b, c.data(), host_c.data(), sign, 1.0 / 3);
    const auto dev_c = on_device_and_back<R>(c, 2 * nr, [&](const void* i, void* o) {
      fft_c2c(Device::cuda(), cplx, b, i, o, sign, 1.0 / 3);
    });
    MPI_CHECK(rel_diff(dev_c, host_c) < tol);
  }
}

}  // namespace

TEST_CASE("cuFFT transforms equal FFTW's along every dim") {
  if (!test::have_device()) return;
  // More outer slices than inner ones: complex blocks batch over outer instead.
  for (const FftBlock& b :
       {FftBlock{1, 16, 1}, FftBlock{3, 7, 1}, FftBlock{2, 13, 5}, FftBlock{4, 12, 3},
        FftBlock{1, 1, 4}, FftBlock{24, 10, 3}, FftBlock{9, 17, 2}}) {
    check_block<double>(b);
    check_block<float>(b);
  }
}

// Runs one mixing product on the device: operands a, b copied there, c preloaded (dW adds).
template <class R, class F>
std::vector<R> product_on_device(const std::vector<R>& a, const std::vector<R>& b,
                                 const std::vector<R>& c, F&& op) {
  auto up = [](const std::vector<R>& h) {
    void* d = device::alloc(std::max<std::size_t>(1, h.size() * sizeof(R)));
    device::copy(d, h.data(), h.size() * sizeof(R), device::Copy::HostToDevice);
    return d;
  };
  void *da = up(a), *db = up(b), *dc = up(c);
  op(da, db, dc);
  device::synchronize(Device::cuda());
  std::vector<R> out(c.size());
  device::copy(out.data(), dc, c.size() * sizeof(R), device::Copy::DeviceToHost);
  device::free(da);
  device::free(db);
  device::free(dc);
  return out;
}

template <class R>
void check_mixing(const MixShape& s) {
  const DType t = std::is_same_v<R, double> ? DType::c128 : DType::c64;
  const double tol = std::is_same_v<R, double> ? 1e-12 : 1e-5;
  const auto x = test::random_values<R>(static_cast<std::size_t>(2 * s.batch * s.cin * s.modes), 4);
  const auto w = test::random_values<R>(static_cast<std::size_t>(2 * s.cin * s.cout * s.modes), 5);
  const auto y =
      test::random_values<R>(static_cast<std::size_t>(2 * s.batch * s.cout * s.modes), 6);
  const auto w0 = test::random_values<R>(w.size(), 7);
  std::vector<R> hy(y.size()), hdx(x.size()), hdw = w0;
  spectral_mix(Device::host(), t, s, x.data(), w.data(), hy.data());
  spectral_mix_dx(Device::host(), t, s, y.data(), w.data(), hdx.data());
  spectral_mix_dw(Device::host(), t, s, x.data(), y.data(), hdw.data());
  const Device dev = Device::cuda();
  const auto dy =
      product_on_device(x, w, std::vector<R>(y.size(), R(7)),
                        [&](auto a, auto b, auto c) { spectral_mix(dev, t, s, a, b, c); });
  const auto ddx =
      product_on_device(y, w, std::vector<R>(x.size(), R(7)),
                        [&](auto a, auto b, auto c) { spectral_mix_dx(dev, t, s, a, b, c); });
  const auto ddw = product_on_device(
      x, y, w0, [&](auto a, auto b, auto c) { spectral_mix_dw(dev, t, s, a, b, c); });
  MPI_CHECK(rel_diff(dy, hy) < tol);
  MPI_CHECK(rel_diff(ddx, hdx) < tol);
  MPI_CHECK(rel_diff(ddw, hdw) < tol);
}

// Restores the CUDA mixing path when a test leaves, by a failure too.
struct MixPathGuard {
  CudaMixPath before = cuda_mix_path();
  ~MixPathGuard() { set_cuda_mix_path(before); }
};

TEST_CASE("CUDA spectral mixing equals the host's, own kernel and cuBLAS GEMMs") {
  if (!test::have_device()) return;
  const MixPathGuard guard;
  for (CudaMixPath path : {CudaMixPath::Kernel, CudaMixPath::Gemm}) {
    set_cuda_mix_path(path);
    INFO("path " << (path == CudaMixPath::Gemm ? "gemm" : "kernel"));
    // Empty batch, input or output channels: sums of no terms (zeros), nothing to write.
    for (const MixShape& s : {MixShape{3, 4, 5, 37}, MixShape{1, 16, 8, 130}, MixShape{6, 3, 2, 1},
                              MixShape{0, 3, 2, 5}, MixShape{2, 0, 3, 4}, MixShape{2, 3, 0, 4}}) {
      INFO("batch " << s.batch << ", " << s.cin << " -> " << s.cout << ", modes " << s.modes);
      check_mixing<double>(s);
      check_mixing<float>(s);
    }
  }
}

TEST_CASE("distributed FFT and SpectralConv on CUDA tensors equal the host path") {
  if (!test::have_device()) return;
  const Mesh line = Mesh::line(test::harness_comm());
  const std::vector<Index> shape{2, 3, 12, 10};
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate()}, line);
  FftOptions o;
  o.modes = {3, 4};
  const DistFft fft(line, spec, DType::f64, o);
  const Tensor x = test::random_tensor(shape, DType::f64, 8);
  const Tensor host = fft.forward(ShardTensor::scatter(line, x, spec)).gather_all();
  const Tensor dev = fft.forward(ShardTensor::scatter(line, x.to(MemSpace::Cuda), spec))
                         .gather_all()
                         .to(MemSpace::Host);
  double m = 0, s = 1e-300;
  for (Index i = 0; i < host.numel(); ++i) {
    m = std::max(
        m, std::abs(host.data<std::complex<double>>()[i] - dev.data<std::complex<double>>()[i]));
    s = std::max(s, std::abs(host.data<std::complex<double>>()[i]));
  }
  MPI_CHECK(m / s < 1e-12);
  SpectralConvOptions so;
  so.in_channels = 3;
  so.out_channels = 2;
  so.modes = {3, 4};
  so.dtype = DType::f64;
  SpectralConvOptions sd = so;
  sd.space = MemSpace::Cuda;
  const MixPathGuard guard;
  for (CudaMixPath path : {CudaMixPath::Kernel, CudaMixPath::Gemm}) {
    set_cuda_mix_path(path);
    const auto r = test::compare_with_one_rank(
        line, spec, [&] { return std::make_unique<SpectralConv>(sd); }, DType::f64, MemSpace::Cuda,
        3, [&] { return std::make_unique<SpectralConv>(so); }, MemSpace::Host);
    INFO((path == CudaMixPath::Gemm ? "gemm: " : "kernel: ") << r.str());
    MPI_CHECK(r.worst() < 1e-11);
  }
}
