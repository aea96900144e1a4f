// Case "fft": the distributed real FFT and the FNO block.
//  (a) forward + inverse real FFT of a 3-D (--n3d, float32) and a 2-D (--n2d) grid against
//      FFTW-MPI on the same grid and ranks (its slab layout, transposed spectrum, MEASURE
//      plans for both, planning untimed), timed interleaved: ratio Tessera / FFTW-MPI;
//  (b) the pruned 3-D transform keeping a quarter of the modes per dim: bytes that leave
//      their rank and time against the unpruned;
//  (c) an FNO block (spectral conv + 1x1 bypass, --width, --modes, on --nfno^2, batch 2)
//      forward + backward, with the compute / all-to-all split: E = T(1 rank, 1 thread) /
//      (min(N, cores) x T(N ranks, 1 thread each)).
// Every timed result is checked untimed: the round trip returns the input, the spectra of
// both libraries carry the same energy.
#include <fftw3-mpi.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <sstream>

#include "apps/bench/cases.hpp"
#include "apps/bench/result_check.hpp"
#include "apps/bench/timing.hpp"
#include "kernels/device/device.hpp"
#include "kernels/spectral_mix.hpp"
#include "runtime/comm/comm_timers.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/spectral/dist_fft.hpp"
#include "runtime/spectral/spectral_conv.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera::bench {
namespace {

double allreduce(MPI_Comm comm, double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, comm);
  return out;
}

// sum |X|^2 over the half-spectrum entries a rank holds: the same total for any layout
// that holds each entry once (both libraries' transposed spectra).
double energy(const std::complex<float>* z, Index count) {
  double e = 0;
  for (Index i = 0; i < count; ++i) e += std::norm(std::complex<double>(z[i]));
  return e;
}

struct Grid {
  std::vector<Index> spatial;
  Index points() const {
    Index p = 1;
    for (Index s : spatial) p *= s;
    return p;
  }
};

// Tessera's round trip and FFTW-MPI's on the same grid; one row.
json transform_row(Context& ctx, const Grid& g, int reps, int threads) {
  const MPI_Comm comm = ctx.world();
  const Mesh mesh = Mesh::line(comm);
  const int nd = static_cast<int>(g.spatial.size());
  std::vector<Index> shape = {1, 1};
  shape.insert(shape.end(), g.spatial.begin(), g.spatial.end());
  std::vector<Placement> dims(shape.size(), Replicate());
  dims[2] = Shard(0);
  // FFTW-MPI decides its slabs; Tessera takes the same sizes.
  std::vector<ptrdiff_t> n(g.spatial.begin(), g.spatial.end());
  const Index bins = g.spatial.back() / 2 + 1;
  std::vector<ptrdiff_t> nc = n;
  nc.back() = bins;
  ptrdiff_t ln0 = 0, l0 = 0, ln1 = 0, l1 = 0;
  const ptrdiff_t alloc = fftwf_mpi_local_size_many_transposed(
      nd, nc.data(), 1, FFTW_MPI_DEFAULT_BLOCK, FFTW_MPI_DEFAULT_BLOCK, comm, &ln0, &l0, &ln1, &l1);
  std::vector<Index> sizes0(static_cast<std::size_t>(mesh.size()));
  Index mine = ln0;
  MPI_Allgather(&mine, 1, MPI_INT64_T, sizes0.data(), 1, MPI_INT64_T, comm);
  std::vector<std::vector<Index>> sizes(shape.size());
  sizes[2] = sizes0;
  const ShardSpec spec(shape, dims, mesh, {}, sizes);
  FftOptions o;
  const DistFft fft(mesh, spec, DType::f32, o);

  // Input: a smooth field plus noise, the same on both sides.
  const Box box = spec.local_box(mesh.coords());
  Tensor x = Tensor::empty(box.shape(), DType::f32);
  const Index inner = x.numel() / std::max<Index>(1, box.extent(2));
  for (Index i = 0; i < x.numel(); ++i) {
    const Index row = box.lo[2] + i / std::max<Index>(1, inner);
    x.data<float>()[i] = static_cast<float>(std::sin(0.01 * static_cast<double>(i % 977 + row)));
  }
  const ShardTensor xs = ShardTensor::unchecked(mesh, spec, x);

  // FFTW-MPI in place: rows of the last dim padded to 2 * bins reals.
  float* buf = fftwf_alloc_real(static_cast<std::size_t>(2 * std::max<ptrdiff_t>(alloc, 1)));
  fftwf_plan fwd = fftwf_mpi_plan_many_dft_r2c(
      nd, n.data(), 1, FFTW_MPI_DEFAULT_BLOCK, FFTW_MPI_DEFAULT_BLOCK, buf,
      reinterpret_cast<fftwf_complex*>(buf), comm, FFTW_MEASURE | FFTW_MPI_TRANSPOSED_OUT);
  fftwf_plan inv = fftwf_mpi_plan_many_dft_c2r(
      nd, n.data(), 1, FFTW_MPI_DEFAULT_BLOCK, FFTW_MPI_DEFAULT_BLOCK,
      reinterpret_cast<fftwf_complex*>(buf), buf, comm, FFTW_MEASURE | FFTW_MPI_TRANSPOSED_IN);
  const Index rows = x.numel() / g.spatial.back();
  auto load_fftw = [&] {
    for (Index r = 0; r < rows; ++r)
      for (Index j = 0; j < g.spatial.back(); ++j)
        buf[r * 2 * bins + j] = x.data<float>()[r * g.spatial.back() + j];
  };
  load_fftw();
  const float inv_n = 1.0f / static_cast<float>(g.points());
  auto fftw_round_trip = [&] {
    fftwf_execute(fwd);
    fftwf_execute(inv);
    for (Index i = 0; i < rows * 2 * bins; ++i) buf[i] *= inv_n;  // Tessera's inverse scales too
  };
  ShardTensor back;
  // The spectrum is a temporary the inverse may overwrite (as FFTW-MPI's in-place c2r does).
  auto tessera_round_trip = [&] { back = fft.inverse(fft.forward(xs), true); };
  const auto [tt, tf] = time_interleaved(comm, reps, 1, tessera_round_trip, fftw_round_trip);

  // Untimed checks: the round trip, and the spectra's energies.
  double err = 0;
  for (Index i = 0; i < x.numel(); ++i)
    err = std::max(
        err, static_cast<double>(std::fabs(back.local().data<float>()[i] - x.data<float>()[i])));
  load_fftw();
  fftwf_execute(fwd);
  // FFTW's transposed spectrum holds local_n1 x n0 x (the other dims, bins last).
  Index fftw_count = static_cast<Index>(ln1) * nc[0];
  for (std::size_t d = 2; d < nc.size(); ++d) fftw_count *= nc[d];
  const double e_fftw =
      allreduce(comm, energy(reinterpret_cast<std::complex<float>*>(buf), fftw_count));
  const ShardTensor X = fft.forward(xs);
  const double e_ours =
      allreduce(comm, energy(X.local().data<std::complex<float>>(), X.local().numel()));
  fftwf_destroy_plan(fwd);
  fftwf_destroy_plan(inv);
  fftwf_free(buf);
  double max_err = 0;
  MPI_Allreduce(&err, &max_err, 1, MPI_DOUBLE, MPI_MAX, comm);
  const bool ok = max_err < 1e-3 && std::fabs(e_ours - e_fftw) <= 1e-3 * e_fftw;
  return {{"what", std::to_string(nd) + "d round trip"},
          {"shape", shape_str(g.spatial)},
          {"ranks", mesh.size()},
          {"threads", threads},
          {"t_tessera_s", tt.median_s},
          {"t_fftw_mpi_s", tf.median_s},
          {"ratio", tt.median_s / tf.median_s},
          {"MiB_moved", static_cast<double>(fft.bytes_moved()) / (1 << 20)},
          {"correct", ok}};
}

// Zeroes the entries of a full (unpruned) spectrum that a transform keeping `modes` of the
// extents `n` drops: a complex dim keeps [0, m) and [n - m, n), the real (last) one [0, m).
void drop_modes(const ShardTensor& X, const std::vector<Index>& n,
                const std::vector<Index>& modes) {
  const Box b = X.local_box();
  const Tensor t = X.local();
  TESSERA_CHECK(t.is_contiguous(), "fft bench: a strided spectrum");
  auto* z = t.data<std::complex<float>>();
  const int nd = b.ndim, first = nd - static_cast<int>(n.size());
  for (Index i = 0; i < t.numel(); ++i) {
    Index rest = i;
    bool keep = true;
    for (int d = nd - 1; d >= 0; --d) {
      const Index k = b.lo[d] + rest % b.extent(d);
      rest /= b.extent(d);
      if (d < first) continue;
      const auto s = static_cast<std::size_t>(d - first);
      keep = keep && (d == nd - 1 ? k < modes[s] : k < modes[s] || k >= n[s] - modes[s]);
    }
    if (!keep) z[i] = 0;
  }
}

// The pruned 3-D transform (about a quarter of the modes per dim) against the unpruned.
json pruned_row(Context& ctx, Index n, int reps, int threads) {
  const Mesh mesh = Mesh::line(ctx.world());
  const std::vector<Index> shape = {1, 1, n, n, n};
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate(), Replicate()}, mesh);
  FftOptions pruned;
  // n/8 low and n/8 high modes of the complex dims, a quarter of the real dim's bins; at
  // least one each (0 would mean all).
  pruned.modes = {std::max<Index>(1, n / 8), std::max<Index>(1, n / 8),
                  std::max<Index>(1, (n / 2 + 1) / 4)};
  const DistFft all(mesh, spec, DType::f32), some(mesh, spec, DType::f32, pruned);
  Tensor x = Tensor::empty(spec.local_shape(mesh.coords()), DType::f32);
  const Box box = spec.local_box(mesh.coords());
  for (Index i = 0; i < x.numel(); ++i) {  // smooth, and rough enough to lose something
    const auto cell = static_cast<double>(i + box.lo[2] * n * n);
    x.data<float>()[i] = static_cast<float>(std::cos(0.003 * cell) + 0.1 * std::sin(0.7 * cell));
  }
  const ShardTensor xs = ShardTensor::unchecked(mesh, spec, x);
  const auto [tp, ta] = time_interleaved(
      ctx.world(), reps, 1, [&] { some.inverse(some.forward(xs)); },
      [&] { all.inverse(all.forward(xs)); });
  // Untimed check: the pruned round trip is the unpruned one of the spectrum with the
  // dropped modes zeroed (a low-pass filter), cell by cell.
  const ShardTensor low = some.inverse(some.forward(xs));
  const ShardTensor full = all.forward(xs);
  drop_modes(full, {n, n, n / 2 + 1}, pruned.modes);
  const ShardTensor want = all.inverse(full, true);
  double err = 0, scale = 0;
  for (Index i = 0; i < low.local().numel(); ++i) {
    const double w = want.local().data<float>()[i];
    err = std::max(err, std::fabs(low.local().data<float>()[i] - w));
    scale = std::max(scale, std::fabs(w));
  }
  double both[2] = {err, scale};
  MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, ctx.world());
  std::ostringstream what;
  what << "3d pruned (modes " << pruned.modes[0] << ", " << pruned.modes[1] << ", "
       << pruned.modes[2] << ")";
  return {{"what", what.str()},
          {"shape", shape_str({n, n, n})},
          {"ranks", mesh.size()},
          {"threads", threads},
          {"t_tessera_s", tp.median_s},
          {"t_unpruned_s", ta.median_s},
          {"MiB_moved", static_cast<double>(some.bytes_moved()) / (1 << 20)},
          {"MiB_moved_unpruned", static_cast<double>(all.bytes_moved()) / (1 << 20)},
          {"max_error", both[0] / std::max(both[1], 1e-30)},
          {"correct", both[1] > 0 && both[0] <= 1e-4 * both[1]}};
}

// Forward + backward of an FNO block: spectral conv + 1x1 conv bypass (summed).
json fno_row(Context& ctx, Index n, Index width, Index modes, int reps, int threads,
             MemSpace space) {
  // Checked before the weights exist (they grow with the modes).
  TESSERA_CHECK(width >= 1 && modes >= 1, "fft: --width and --modes must be at least 1");
  TESSERA_CHECK(n >= 2 * modes, "fft: --modes=" << modes << " needs --nfno of at least "
                                                << 2 * modes << ", not " << n);
  const Mesh mesh = Mesh::line(ctx.world());
  const std::vector<Index> shape = {2, width, n, n};
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  SpectralConvOptions so;
  so.in_channels = so.out_channels = width;
  so.modes = {modes};
  so.space = space;
  SpectralConv spectral(so);
  ConvOptions co;
  co.in_channels = co.out_channels = width;
  co.kernel = {1};
  co.space = space;
  ConvNd bypass(co);
  Tensor x = Tensor::empty(spec.local_shape(mesh.coords()), DType::f32);
  for (Index i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(std::sin(0.01 * i));
  const ShardTensor xs = ShardTensor::unchecked(mesh, spec, x.to(space));
  const auto block = [space](SpectralConv& sp, ConvNd& bp, const ShardTensor& in) {
    const ShardTensor a = sp.forward(in), b = bp.forward(in);
    add_into(a.local(), b.local());
    sp.backward(a);
    bp.backward(a);
    if (space == MemSpace::Cuda) device::synchronize(Device::cuda());
  };
  const SplitTiming st = time_collective_split(
      ctx.world(), reps, 1, [&] { block(spectral, bypass, xs); },
      [] { return comm_times().alltoall_s; });
  const Timing& t = st.total;
  // Untimed check, each path on its own (the bypass would drown the spectral part of a sum):
  // outputs and input gradients equal one rank's with the same weights (the layers'
  // initialization is seeded), on the host, gathered.
  const auto host_all = [&](const ShardTensor& v) {
    return ShardTensor::unchecked(mesh, v.spec(), v.local().to(MemSpace::Host)).gather_all();
  };
  const ShardTensor a = spectral.forward(xs), b = bypass.forward(xs);
  const Tensor ya = host_all(a), yb = host_all(b), x1 = host_all(xs);
  add_into(a.local(), b.local());  // the block's output, the gradient both paths take back
  const Tensor dxa = host_all(spectral.backward(a)), dxb = host_all(bypass.backward(a));
  const Mesh solo = Mesh::line(MPI_COMM_SELF);
  const ShardSpec spec1(shape, {Replicate(), Replicate(), Shard(0), Replicate()}, solo);
  so.space = co.space = MemSpace::Host;
  SpectralConv spectral1(so);
  ConvNd bypass1(co);
  const ShardTensor xs1 = ShardTensor::unchecked(solo, spec1, x1);
  const ShardTensor a1 = spectral1.forward(xs1), b1 = bypass1.forward(xs1);
  const double out_err = std::max(rel_max_diff(ya, a1.local()), rel_max_diff(yb, b1.local()));
  add_into(a1.local(), b1.local());
  const double err = std::max({out_err, rel_max_diff(dxa, spectral1.backward(a1).local()),
                               rel_max_diff(dxb, bypass1.backward(a1).local())});
  // On the host at N ranks: E from one-rank (rank 0, the reference layers) and N-rank blocks
  // timed in pairs, which a drifting machine cannot skew as it skews two launches.
  PairedEfficiency paired;
  if (mesh.size() > 1 && space == MemSpace::Host)
    paired = time_paired(
        ctx.world(), reps, [&] { block(spectral1, bypass1, xs1); },
        [&] { block(spectral, bypass, xs); });
  std::string where;
  if (space == MemSpace::Cuda)
    where = std::string(", CUDA, mixing ") +
            (kernels::cuda_mix_path() == kernels::CudaMixPath::Gemm ? "cuBLAS" : "kernel");
  const double a2a = st.part_s;
  json row = {{"what", "FNO block fwd+bwd (width " + std::to_string(width) + ", modes " +
                           std::to_string(modes) + ", batch 2" + where + ")"},
              {"shape", shape_str({n, n})},
              {"ranks", mesh.size()},
              {"threads", threads},
              {"cores", std::max(1, omp_get_num_procs())},
              {"t_tessera_s", t.median_s},
              {"t_alltoall_s", a2a},
              {"t_compute_s", t.median_s - a2a},
              {"max_error", err},
              {"correct", err <= 1e-4}};
  if (!paired.e.empty()) {
    row["e_paired"] = paired.e_median();
    row["t1_paired_s"] = summarize(paired.t1_s).median_s;
    row["tN_paired_s"] = summarize(paired.tn_s).median_s;
  }
  return row;
}

json run(Context& ctx, const cli::Args& opt) {
  TESSERA_CHECK(opt.str("space") == "host" || opt.str("space") == "cuda",
                "fft: --space is host or cuda, not '" << opt.str("space") << "'");
  TESSERA_CHECK(opt.str("space") == "host" || device::count() > 0,
                "fft: --space=cuda, but this process sees no CUDA device");
  const int threads = threads_option(opt);
  omp_set_num_threads(threads);
  fftwf_mpi_init();
  kernels::set_fft_planning(kernels::FftPlanning::Measure);
  const int reps = reps_option(opt);
  const auto which = opt.choices("which", {"3d", "2d", "pruned", "fno"});
  const Index n3 = opt.integer_in("n3d", 1, Index{1} << 20),
              n2 = opt.integer_in("n2d", 1, Index{1} << 20);
  json rows = json::array();
  if (which.count("3d")) rows.push_back(transform_row(ctx, {{n3, n3, n3}}, reps, threads));
  if (which.count("2d")) rows.push_back(transform_row(ctx, {{n2, n2}}, reps, threads));
  if (which.count("pruned")) rows.push_back(pruned_row(ctx, n3, reps, threads));
  if (which.count("fno"))
    rows.push_back(fno_row(ctx, size_option(opt, "nfno"), size_option(opt, "width"),
                           size_option(opt, "modes"), reps, threads,
                           opt.str("space") == "cuda" ? MemSpace::Cuda : MemSpace::Host));
  kernels::set_fft_planning(kernels::FftPlanning::Estimate);
  return rows;
}

json goals(const json& rows) {
  json g = json::array();
  for (const auto& r : rows) {
    const std::string what = std::string(r.at("what")) + " " + std::string(r.at("shape")) + ", " +
                             std::to_string(int(r.at("ranks"))) + " ranks";
    if (r.contains("t_fftw_mpi_s"))
      g.push_back(goal(what + ": Tessera / FFTW-MPI", r.at("correct") ? double(r.at("ratio")) : 1e9,
                       "<=", 1.0));
    if (r.contains("MiB_moved_unpruned") && int(r.at("ranks")) > 1)
      g.push_back(goal(what + ": bytes moved / unpruned",
                       double(r.at("MiB_moved")) / double(r.at("MiB_moved_unpruned")), "<=", 0.25));
    if (r.contains("e_paired"))  // one-rank and N-rank blocks timed in turn, in one launch
      g.push_back(goal(what + ": E = T(1 rank) / (" +
                           std::to_string(std::min(int(r.at("ranks")), int(r.at("cores")))) +
                           " x T(" + std::to_string(int(r.at("ranks"))) +
                           " ranks)), 1 thread each, timed in pairs",
                       double(r.at("e_paired")), ">=", 0.85));
    else if (r.contains("t_alltoall_s") && int(r.at("ranks")) > 1 && int(r.at("threads")) == 1)
      for (const auto& one : rows)
        if (one.at("what") == r.at("what") && int(one.at("ranks")) == 1 &&
            int(one.at("threads")) == 1) {
          const int used = std::min(int(r.at("ranks")), int(r.value("cores", 1)));
          g.push_back(goal(what + ": E = T(1 rank) / (" + std::to_string(used) + " x T(" +
                               std::to_string(int(r.at("ranks"))) + " ranks)), 1 thread each",
                           double(one.at("t_tessera_s")) / (used * double(r.at("t_tessera_s"))),
                           ">=", 0.85));
        }
  }
  return g;
}

}  // namespace

Case fft_case() {
  Case c;
  c.name = "fft";
  c.help = "distributed real FFT vs FFTW-MPI, pruned transform, FNO block scaling";
  c.options = {{"n3d", "N", "3-D grid side (float32)", "256"},
               {"n2d", "N", "2-D grid side (float32)", "4096"},
               {"nfno", "N", "FNO block grid side", "256"},
               {"width", "C", "FNO block channels", "32"},
               {"modes", "M", "FNO block modes per dim", "16"},
               {"which", "LIST", "rows: 3d, 2d, pruned, fno", "3d,2d,pruned,fno"},
               {"space", "WHERE",
                "the FNO block's memory: host or cuda (TESSERA_SPECTRAL_MIX "
                "picks the CUDA mixing)",
                "host"},
               {"reps", "N", "timed repetitions", "5"},
               {"threads", "N", "OpenMP threads per rank", "1"}};
  c.rank_counts = {1, 2, 4};
  c.columns = {"what",
               "shape",
               "ranks",
               "threads",
               "t_tessera_s",
               "t_fftw_mpi_s",
               "ratio",
               "t_unpruned_s",
               "t_alltoall_s",
               "t_compute_s",
               "e_paired",
               "MiB_moved",
               "MiB_moved_unpruned",
               "correct"};
  c.run = run;
  c.goals = goals;
  return c;
}

}  // namespace tessera::bench
