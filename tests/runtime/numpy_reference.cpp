// The Tessera half of the numpy cross-check (tests/runtime/numpy_reference.py): reads the
// fields, spectra and spectral weights that h5py wrote, runs the distributed real FFTs
// (full and pruned, every normalization, 2-D and 3-D, forward and inverse) and FNO
// SpectralConv layers on them, sharded as the mesh argument says, and writes every result
// with the sharded HDF5 writer. numpy (pocketfft, not FFTW) then computes the same results
// and compares. With `cuda` the tensors and layers live on the GPU (cuFFT, the CUDA spectral
// mixing); without a device it exits 77, the skip code.
// Usage: numpy_reference IN.h5 OUT.h5 line|pencil|data [host|cuda]
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "io/file.hpp"
#include "io/sharded.hpp"
#include "kernels/device/device.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "runtime/spectral/dist_fft.hpp"
#include "runtime/spectral/spectral_conv.hpp"

using namespace tessera;

namespace {

// Placements of an (N, C, spatial...) tensor for the mesh kind: slabs on a line, pencils
// on a 2-D mesh of the spatial dims, or the batch over `data` and slabs over `domain`.
std::vector<Placement> placements(const std::string& kind, std::size_t ndim) {
  std::vector<Placement> p(ndim, Replicate());
  if (kind == "line") {
    p[2] = Shard(0);
  } else if (kind == "pencil") {
    p[2] = Shard(0);
    p[3] = Shard(1);
  } else {
    p[0] = Shard(0);
    p[2] = Shard(1);
  }
  return p;
}

Mesh make_mesh(const std::string& kind) {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (kind == "line") return Mesh::line(MPI_COMM_WORLD);
  const int a = (n % 2 == 0) ? 2 : 1;
  if (kind == "pencil") return Mesh(MPI_COMM_WORLD, {a, n / a}, {"x", "y"});
  if (kind == "data") return Mesh(MPI_COMM_WORLD, {a, n / a}, {"data", "domain"});
  throw Error("numpy_reference: mesh must be line, pencil or data, not '" + kind + "'");
}

struct Run {
  const io::File& in;
  io::File& out;
  const Mesh& mesh;
  std::string kind;
  MemSpace space;

  ShardTensor on_space(const ShardTensor& t) const {
    return ShardTensor::unchecked(mesh, t.spec(), t.local().in_space(space));
  }

  ShardTensor read(const std::string& name, DType dt) const {
    const std::vector<Index> shape = in.info(name).shape;
    return on_space(io::read_sharded(in, name, mesh,
                                     ShardSpec(shape, placements(kind, shape.size()), mesh), dt));
  }

  // Forward real FFT of `field` over its spatial dims.
  void forward(const std::string& field, const std::string& result, std::vector<Index> modes,
               kernels::FftNorm norm) {
    const ShardTensor x = read(field, DType::f64);
    FftOptions o;
    o.modes = std::move(modes);
    o.norm = norm;
    const DistFft fft(mesh, x.spec(), DType::f64, o);
    io::write_sharded(out, result, fft.forward(x));
  }

  // Inverse of the spectrum `spectrum` (kept modes as the forward stores them), read
  // straight into the plan's spectrum layout.
  void inverse(const std::string& spectrum, const std::vector<Index>& real_shape,
               const std::string& result, std::vector<Index> modes, kernels::FftNorm norm) {
    FftOptions o;
    o.modes = std::move(modes);
    o.norm = norm;
    const ShardSpec real_spec(real_shape, placements(kind, real_shape.size()), mesh);
    const DistFft fft(mesh, real_spec, DType::f64, o);
    const ShardTensor X =
        on_space(io::read_sharded(in, spectrum, mesh, fft.spectrum_spec(), DType::c128));
    io::write_sharded(out, result, fft.inverse(X));
  }

  // The FNO layer with the weights h5py wrote (C_in, C_out, kept..., 2), replicated or
  // sharded by mode (then each rank keeps its block of the same global weights).
  void spectral_conv(const std::string& field, const std::string& weights,
                     const std::string& result, bool mode_sharded) {
    const ShardTensor x = read(field, DType::f64);
    const io::DatasetInfo wi = in.info(weights);
    SpectralConvOptions o;
    o.nd = static_cast<int>(x.spec().global_shape().size()) - 2;
    o.in_channels = wi.shape[0];
    o.out_channels = wi.shape[1];
    o.modes.clear();
    for (int d = 0; d < o.nd; ++d) {
      const Index kept = wi.shape[2 + d];
      o.modes.push_back(d + 1 < o.nd ? kept / 2 : kept);  // complex dims keep both corners
    }
    o.dtype = DType::f64;
    o.space = space;
    o.shard_weights = mode_sharded;
    SpectralConv layer(o);
    Box block = Box::from_shape(wi.shape);
    if (mode_sharded) {
      layer.bind(mesh, x.spec());
      block = layer.weight().shard->block;
    }
    layer.weight().value.copy_from(io::read_slab(in, weights, block, DType::f64));
    io::write_sharded(out, result, layer.forward(x));
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    if (argc != 4 && argc != 5)
      throw Error("usage: numpy_reference IN.h5 OUT.h5 line|pencil|data [host|cuda]");
    const std::string kind = argv[3], where = argc == 5 ? argv[4] : "host";
    if (where != "host" && where != "cuda")
      throw Error("numpy_reference: space must be host or cuda, not '" + where + "'");
    const MemSpace space = where == "cuda" ? MemSpace::Cuda : MemSpace::Host;
    if (space == MemSpace::Cuda && device::count() == 0) {
      std::printf("SKIPPED: no CUDA device visible\n");
      MPI_Finalize();
      return 77;
    }
    const Mesh mesh = make_mesh(kind);
    const io::File in = io::File::open(argv[1], MPI_COMM_WORLD);
    io::File out = io::File::create(argv[2], MPI_COMM_WORLD);
    Run r{in, out, mesh, kind, space};
    using kernels::FftNorm;
    r.forward("/x2", "/rfft2", {}, FftNorm::Backward);
    r.forward("/x2", "/rfft2_pruned", {3, 2}, FftNorm::Ortho);
    r.forward("/x3", "/rfft3", {}, FftNorm::Forward);
    r.forward("/x3", "/rfft3_pruned", {2, 3, 2}, FftNorm::Backward);
    r.inverse("/X2", in.info("/x2").shape, "/irfft2", {}, FftNorm::Backward);
    r.inverse("/X2_pruned", in.info("/x2").shape, "/irfft2_pruned", {3, 2}, FftNorm::Ortho);
    r.inverse("/X3_pruned", in.info("/x3").shape, "/irfft3_pruned", {2, 3, 2}, FftNorm::Forward);
    r.spectral_conv("/x2", "/W2", "/sconv2", false);
    r.spectral_conv("/x2", "/W2", "/sconv2_mode_sharded", true);
    r.spectral_conv("/x3", "/W3", "/sconv3", false);
    r.spectral_conv("/x3", "/W3", "/sconv3_mode_sharded", true);
    out.close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numpy_reference: %s\n", e.what());
    rc = 1;
  }
  // Every rank ran the same collective sequence, so a failure is on every rank.
  MPI_Finalize();
  return rc;
}
