// tessera-infer --checkpoint CKPT --input IN.h5 --output OUT.h5 [--mesh SPEC]
// Runs a trained checkpoint on every sample of IN.h5, sharded over the ranks (any grid the
// model takes: spatial extents divisible by 2^depth, larger than in training is fine),
// and writes the prediction to OUT.h5 in the dataset schema (/fields/TARGET, float32,
// (N, C, spatial...)). A point-cloud model (trained on /points quantities) reads the point
// cloud split in contiguous ranges of points and writes /points/coords and
// /points/features (N, P, C) with the targets as variables. When IN.h5 also holds the
// targets, prints the relative L2 error of the prediction per sample and on average.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "apps/common/builders.hpp"
#include "apps/common/cli.hpp"
#include "apps/common/node_memory.hpp"
#include "apps/common/report_errors.hpp"
#include "apps/common/trainer.hpp"
#include "io/finite.hpp"
#include "io/output_file.hpp"
#include "io/schema.hpp"
#include "io/sharded.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

using namespace tessera;
using namespace tessera::app;

namespace {

const std::vector<cli::Option> kOptions = {
    {"checkpoint", "CKPT.h5",
     "a tessera-train checkpoint (its config names the input and target fields)", ""},
    {"input", "IN.h5", "HDF5 file with the input fields (/fields/NAME, (N, C, spatial...))", ""},
    {"output", "OUT.h5", "HDF5 file to create with the predicted target fields", ""},
    {"mesh", "SPEC", "rank mesh, e.g. domain=4; auto puts all ranks on one domain axis", "auto"}};

std::string help() {
  return cli::help_text(
      "tessera-infer --checkpoint CKPT.h5 --input IN.h5 --output OUT.h5 [--mesh SPEC]",
      "Runs a trained checkpoint on every sample of IN.h5, sharded over the ranks, and writes\n"
      "the prediction to OUT.h5; prints the relative L2 error when IN.h5 holds the targets.",
      kOptions);
}

std::string field(const std::string& n) {
  return std::string(io::schema::kFields) + "/" + n;
}

// Sample n of the listed grid fields, this rank's spatial block, into `mem` (a contiguous
// float32 host tensor (1, C, cells...), as the fields are stored), channels concatenated, the
// block's first cell at `first` of mem's cells: straight from HDF5, no intermediate tensor.
void read_fields_into(const io::File& f, const FieldSet& fs, Index n, const Box& block,
                      const Tensor& mem, const std::vector<Index>& first) {
  Index c0 = 0;
  for (std::size_t i = 0; i < fs.names.size(); ++i) {
    std::vector<Index> lo = {n, 0}, hi = {n + 1, fs.channels[i]}, mlo = {0, c0},
                       mhi = {1, c0 + fs.channels[i]};
    for (int d = 0; d < block.ndim; ++d) {
      const std::size_t k = static_cast<std::size_t>(d);
      lo.push_back(block.lo[d]), hi.push_back(block.hi[d]);
      mlo.push_back(first[k]), mhi.push_back(first[k] + block.extent(d));
    }
    io::read_box(f, field(fs.names[i]), Box(lo, hi), mem, Box(mlo, mhi));
    c0 += fs.channels[i];
  }
}

// One sample of the listed fields, this rank's spatial block, channels concatenated.
Tensor read_sample(const io::File& f, const FieldSet& fs, Index n, const Box& block, DType dtype) {
  // Not checked here: the caller says what a non-finite input or target means.
  if (fs.points)
    return read_point_quantities(f, fs, n, n + 1, block.lo[0], block.hi[0], dtype, false);
  std::vector<Index> shape = {1, fs.total_channels()};
  for (int d = 0; d < block.ndim; ++d) shape.push_back(block.extent(d));
  const Tensor out = Tensor::empty(shape, DType::f32);
  read_fields_into(f, fs, n, block, out, std::vector<Index>(static_cast<std::size_t>(block.ndim)));
  return host_converted(out, dtype);
}

// The same into the interior of x's ghost room (x: a float32 host shard with room): the first
// layer's halo exchange fills the ghosts in place.
void read_sample_into_room(const io::File& f, const FieldSet& fs, Index n, const Box& block,
                           const ShardTensor& x) {
  const Box& rb = x.room_box();  // global box of the padded buffer: (0..1, C, padded...)
  std::vector<Index> first;
  for (int d = 0; d < block.ndim; ++d) first.push_back(block.lo[d] - rb.lo[d + 2]);
  read_fields_into(f, fs, n, block, x.room(), first);
}

// Sample s of a point prediction (1, C, this rank's points) as /points/features rows
// (channels last), with the input's coordinates of the same points.
void write_points(const io::File& in, io::File& out, Index s, const Box& block, const Tensor& pred,
                  bool writer) {
  const Index b = block.lo[0], e = writer ? block.hi[0] : block.lo[0], len = e - b;
  const Index C = pred.shape(1);
  const Tensor xyz =
      io::read_slab(in, io::schema::kCoords, Box({s, b, 0}, {s + 1, e, 3}), DType::f32);
  io::write_box(out, io::schema::kCoords, Box({s, b, 0}, {s + 1, e, 3}), xyz,
                Box::from_shape(xyz.shape()));
  Tensor rows = Tensor::empty({1, len, C}, DType::f32);
  for (Index p = 0; p < len; ++p)
    for (Index c = 0; c < C; ++c)
      rows.data<float>()[p * C + c] = pred.data<float>()[c * (block.hi[0] - b) + p];
  io::write_box(out, io::schema::kFeatures, Box({s, b, 0}, {s + 1, e, C}), rows,
                Box::from_shape(rows.shape()));
}

// A checkpoint buffer of counts (float64 in the file), empty when the checkpoint has none.
// Counts and extents stored as float64 buffers: whole numbers from 1 to 2^40, else the
// checkpoint is refused (a NaN or 1.5 cast to an integer would be undefined or truncated).
std::vector<Index> index_buffer(const io::Checkpoint& ck, const std::string& name) {
  std::vector<Index> v;
  for (const auto& b : ck.buffers)
    if (b.name == name)
      for (Index i = 0; i < b.tensor.numel(); ++i) {
        const double x = b.tensor.data<double>()[i];
        TESSERA_CHECK(x >= 1 && x <= 1099511627776.0 && x == std::floor(x),
                      "checkpoint: buffers/" << name << "[" << i << "] = " << x
                                             << " is not a count (a whole number >= 1)");
        v.push_back(static_cast<Index>(x));
      }
  return v;
}

int run(Context& ctx, int argc, char** argv) {
  const cli::Args args(std::vector<std::string>(argv + 1, argv + argc), kOptions);
  if (args.help()) {
    if (ctx.rank() == 0) std::cout << help();
    return 0;
  }
  TESSERA_CHECK(args.positional().empty(),
                "unexpected argument '" << args.positional()[0] << "' (see --help)");
  // Read now, so a missing one fails before the long work and not after it.
  const std::string checkpoint = args.str("checkpoint"), input = args.str("input"),
                    output = args.str("output");

  // The prediction must not replace what it is made from.
  io::refuse_alias(ctx.world(), "--output", output,
                   {{"--input", input}, {"--checkpoint", checkpoint}});
  io::check_output_path(ctx.world(), output);  // not a folder, link or FIFO: before the work
  const double t0 = MPI_Wtime();
  // Streamed: the parameters are checked, then loaded, one whole tensor at a time.
  io::Checkpoint ck = io::load_checkpoint(checkpoint, ctx.world(), io::CheckpointParts::Model,
                                          io::CheckpointRead::Streamed);
  const TrainConfig cfg = parse_config(ck.config, {}, checkpoint + " (config attribute)");
  const Mesh mesh = make_mesh(ctx.world(), args.str("mesh"), "--mesh");
  const MemSpace space = model_space(ctx.device());
  const DType dtype = model_dtype(cfg.model);

  const io::File in = io::File::open(input, ctx.world());
  io::schema::require_valid(in);
  FieldSet inputs;
  try {
    inputs = field_set(in, cfg.data.inputs);
  } catch (const Error& e) {
    // Say which model asks for the fields: another model's file names none of them.
    std::string names;
    for (const auto& f : cfg.data.inputs) names += (names.empty() ? "" : ", ") + f;
    throw Error(input + ": the checkpoint's model (model.type = '" + cfg.model.type +
                "') reads the fields " + names + " (its data.inputs" +
                (std::find(cfg.data.inputs.begin(), cfg.data.inputs.end(), "coords") !=
                         cfg.data.inputs.end()
                     ? ": a point cloud"
                     : ": a grid") +
                "): " + e.what());
  }
  const bool points = inputs.points;
  const std::string first = points ? io::schema::kCoords : field(inputs.names[0]);
  std::vector<Index> shape = in.info(first).shape;
  if (points) shape = {shape[0], inputs.total_channels(), shape[1]};  // (N, C, P)
  const Index n = shape[0];
  TESSERA_CHECK(n > 0, in.where(first) << " holds 0 samples: nothing to infer");
  const std::vector<Index> spatial(shape.begin() + 2, shape.end());
  const int nd = static_cast<int>(spatial.size());
  for (const auto& f : points ? std::vector<std::string>{} : inputs.names) {
    std::vector<Index> s = in.info(field(f)).shape;
    s[1] = shape[1];
    TESSERA_CHECK(s == shape, in.where(field(f))
                                  << " differs from " << inputs.names[0] << " in N or the grid");
  }
  // The target fields' channel split, as training saw it.
  std::vector<Index> tch = index_buffer(ck, "data.target_channels");
  if (tch.empty()) tch.assign(cfg.data.targets.size(), 1);
  TESSERA_CHECK(tch.size() == cfg.data.targets.size(),
                "checkpoint: target channels do not match its config");
  Index cout = 0;
  for (Index c : tch) cout += c;

  // The grid the model trained on (grid-shaped parameters: learned positions), or this one.
  std::vector<Index> trained_grid = index_buffer(ck, "data.grid");
  if (trained_grid.empty()) trained_grid = spatial;
  TESSERA_CHECK(points || static_cast<int>(trained_grid.size()) == nd,
                input << ": its fields have " << nd << " spatial dims, the checkpoint's model was "
                      << "trained on the " << trained_grid.size() << "-D grid "
                      << shape_str(trained_grid));
  const std::unique_ptr<Model> net = make_model(ctx.world(), 2, cfg, nd, inputs.total_channels(),
                                                cout, space, points, trained_grid);
  Model& model = *net;
  std::vector<Index> xshape = {1, inputs.total_channels()};  // one sample at a time
  xshape.insert(xshape.end(), spatial.begin(), spatial.end());
  std::vector<Index> file_shape = xshape;  // what errors quote: the file's N samples
  file_shape[0] = n;
  const std::string problem = model.input_problem(file_shape);
  TESSERA_CHECK(problem.empty(), input << ": the model cannot take it: " << problem);
  // Parameters and buffers from the checkpoint (its signature must match the model).
  const std::string sig = model.signature(), stored = current_unet_signature(ck.model);
  // The usual cause: inputs with other channel counts than in training (only in= differs);
  // anything else means the checkpoint's config does not describe the model it stores.
  std::string names;
  for (const auto& f : cfg.data.inputs) names += (names.empty() ? "" : ", ") + f;
  const std::string diff = signature_difference(stored, sig);
  const bool inputs_differ = diff.rfind("in=", 0) == 0 && diff.find("; ") == std::string::npos;
  TESSERA_CHECK(stored == sig || !inputs_differ,
                input << ": its input fields (" << names << ": " << inputs.total_channels()
                      << " channels) do not fit the checkpoint's model (" << diff
                      << ", the checkpoint's first): it is '" << stored << "'");
  TESSERA_CHECK(stored == sig, checkpoint << ": its config does not build the model it stores ("
                                          << diff << ", the stored model's first; edited, or "
                                          << "written by another version?): it stores '" << stored
                                          << "'");
  const GridLayout layout = GridLayout::of(mesh, nd);
  const std::vector<Placement> dims = layout.dims(nd, false);
  const ShardSpec xspec(xshape, dims, mesh);
  // Sharded parameters (mode-sharded spectral weights, learned position tables) take their
  // blocks for this decomposition before the load, so that each rank keeps only its block of
  // every tensor it reads (the point models have none).
  if (!points) model.graph().bind(mesh, {xspec});
  load_parameter_state(model.graph(), ck.params);
  ck.params.clear();  // the file closes here, on every rank at once
  std::vector<Model::Buffer> bufs;
  for (const auto& b : ck.buffers)
    if (b.tensor.dtype() == DType::f64)
      bufs.push_back({b.name, std::vector<double>(b.tensor.data<double>(),
                                                  b.tensor.data<double>() + b.tensor.numel())});
  model.load_buffers(bufs);
  model.train(false);
  model.graph().set_grad_enabled(false);  // forward only: each op drops what it would save
  const auto [in_norm, out_norm] = normalizers_from(ck.buffers, cfg.data.normalize);

  const Box xbox = xspec.local_box(mesh.coords());
  std::vector<Index> blo, bhi;
  for (int d = 0; d < nd; ++d) blo.push_back(xbox.lo[d + 2]), bhi.push_back(xbox.hi[d + 2]);
  const Box block(blo, bhi);
  // Ranks that replicate a block over the data axis: only coordinate 0 writes it.
  const bool writer =
      layout.data_axis < 0 || mesh.coords()[static_cast<std::size_t>(layout.data_axis)] == 0;

  // Targets present in the input file: report the error.
  bool have_truth = true;
  std::vector<std::string> variables;
  if (points && in.exists(io::schema::kFeatures))
    variables = in.attr_strings(io::schema::kFeatures, "variables");
  // A point target is a feature variable, or the coordinates themselves ("coords").
  for (const auto& t : cfg.data.targets)
    have_truth =
        have_truth &&
        (points
             ? (t == "coords" ? in.exists(io::schema::kCoords)
                              : std::find(variables.begin(), variables.end(), t) != variables.end())
             : in.exists(field(t)));
  FieldSet truth_fs;
  if (have_truth && points) {
    truth_fs = field_set(in, cfg.data.targets);
  } else if (have_truth) {
    truth_fs = field_set(in, cfg.data.targets);
    // Targets on another grid or with other counts would give a wrong error figure.
    for (std::size_t i = 0; i < truth_fs.names.size(); ++i) {
      std::vector<Index> want = {n, tch[i]};
      want.insert(want.end(), spatial.begin(), spatial.end());
      const std::vector<Index> got = in.info(field(truth_fs.names[i])).shape;
      TESSERA_CHECK(got == want, in.where(field(truth_fs.names[i]))
                                     << " has shape " << shape_str(got) << ", the inputs need "
                                     << shape_str(want)
                                     << " (the same samples and grid, the checkpoint's channels)");
    }
  }

  io::NewFile out_file(output, ctx.world());  // renamed into place when complete
  io::File& out = out_file.file();
  io::schema::write_root(out, "tessera-infer");
  out.set_attr("/", "checkpoint", checkpoint);
  out.set_attr("/", "input", input);
  const Index P = points ? spatial[0] : 0;
  if (points) {  // the coordinates, copied through, and the predicted targets as features
    out.create_dataset(io::schema::kCoords, {n, P, 3}, DType::f32);
    out.create_dataset(io::schema::kFeatures, {n, P, cout}, DType::f32);
    std::vector<std::string> vars;
    for (std::size_t i = 0; i < cfg.data.targets.size(); ++i)
      for (Index c = 0; c < tch[i]; ++c)
        vars.push_back(tch[i] == 1 ? cfg.data.targets[i] : cfg.data.targets[i] + std::to_string(c));
    out.set_attr(io::schema::kFeatures, "variables", vars);
  }
  for (std::size_t i = 0; i < (points ? 0 : cfg.data.targets.size()); ++i) {
    std::vector<Index> s = {n, tch[i]};
    s.insert(s.end(), spatial.begin(), spatial.end());
    std::vector<Index> chunk = {1, tch[i]};
    chunk.insert(chunk.end(), spatial.begin(), spatial.end());
    const std::string dset = field(cfg.data.targets[i]);
    out.create_dataset(dset, s, DType::f32, chunk);
    io::schema::GridMeta m;
    // The target's own channel names where the input file holds it (a test set), else the
    // field's name (numbered past one channel).
    if (in.exists(dset) && in.has_attr(dset, "variables")) {
      const auto v = in.attr_strings(dset, "variables");
      if (static_cast<Index>(v.size()) == tch[i]) m.variables = v;
    }
    for (Index c = 0; m.variables.size() < static_cast<std::size_t>(tch[i]); ++c)
      m.variables.push_back(tch[i] == 1 ? cfg.data.targets[i]
                                        : cfg.data.targets[i] + std::to_string(c));
    const std::string src = field(inputs.names[0]);
    for (const char* k : {"spacing", "extent", "origin"})
      if (in.has_attr(src, k)) {
        auto v = in.attr_doubles(src, k);
        (std::string(k) == "spacing"  ? m.spacing
         : std::string(k) == "extent" ? m.extent
                                      : m.origin) = v;
      }
    io::schema::write_grid_meta(out, dset, m);
  }

  // The ghost room the model's first ops want of its input: grid samples of float32 on the
  // host are read from the file straight into it (one copy of each sample fewer, as
  // tessera-train's batches).
  const HaloWidths room =
      points ? HaloWidths() : model.graph().input_room(0, mesh, std::vector<ShardSpec>{xspec});
  const bool into_room = !room.empty() && space == MemSpace::Host && dtype == DType::f32;
  double err_sum = 0;
  Index err_count = 0;
  const double t_loop = MPI_Wtime();
  for (Index s = 0; s < n; ++s) {
    ShardTensor xin;
    bool finite = true;
    if (into_room) {
      xin = ShardTensor::with_room(mesh, xspec, room, dtype, MemSpace::Host);
      read_sample_into_room(in, inputs, s, block, xin);
      finite = io::first_nonfinite(xin.room()) < 0;  // the ghosts are zeros
    } else {
      const Tensor x = read_sample(in, inputs, s, block, dtype);
      finite = io::first_nonfinite(x) < 0;
      xin = ShardTensor::unchecked(mesh, xspec, x);
    }
    collective_check(
        ctx.world(), finite,
        input + ": sample " + std::to_string(s) + " of the input fields holds a non-finite value");
    in_norm.apply(xin.local());
    // Finite in the file, past the model's type once normalized: said here, naming the sample.
    collective_check(ctx.world(), io::first_nonfinite(into_room ? xin.room() : xin.local()) < 0,
                     input + ": sample " + std::to_string(s) + " leaves the range of " +
                         name_of(dtype) +
                         " once normalized with the checkpoint's statistics (a finite value "
                         "far from the training data's mean)");
    if (!into_room) xin = ShardTensor::unchecked(mesh, xspec, xin.local().to(space));
    const ShardTensor y = model.forward(xin);
    Tensor pred = y.local().to(MemSpace::Host).clone();
    // Where the overflow happens, for the message: in the model, in undoing the target
    // normalization (the checkpoint's data.target_mean/std), or in float32 as stored; the
    // first of these where any rank's values overflowed, so every rank names one cause.
    int stage = io::first_nonfinite(pred) >= 0 ? 3 : 0;
    out_norm.invert(pred);
    if (stage == 0 && io::first_nonfinite(pred) >= 0) stage = 2;
    const Tensor pred32 = host_converted(pred, DType::f32);
    if (stage == 0 && io::first_nonfinite(pred32) >= 0) stage = 1;
    TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, &stage, 1, MPI_INT, MPI_MAX, ctx.world()));
    // A prediction of NaN or Inf (finite inputs the model overflows on, in its dtype or in
    // float32 as stored) is no prediction: refused, not written, on every rank.
    const std::string where =
        stage == 3   ? "the model overflows on this input in " + name_of(dtype)
        : stage == 2 ? "the model's output is finite; undoing the target normalization with "
                       "the checkpoint's data.target_mean/data.target_std overflows"
                     : "the model's output is finite, but it does not fit float32 as stored";
    if (stage > 0)
      throw Error(input + ": sample " + std::to_string(s) +
                  ": the prediction holds a non-finite value (" + where +
                  "): no prediction written");
    if (points) write_points(in, out, s, block, pred32, writer);
    Index c0 = 0;
    for (std::size_t i = 0; i < (points ? 0 : cfg.data.targets.size()); ++i) {
      std::vector<Index> lo = {s, 0}, hi = {s + 1, tch[i]}, mlo(pred32.shape().size(), 0),
                         mhi = pred32.shape();
      for (int d = 0; d < nd; ++d) lo.push_back(block.lo[d]), hi.push_back(block.hi[d]);
      mlo[1] = c0;
      mhi[1] = c0 + tch[i];
      Box fb(lo, hi), mb(mlo, mhi);
      if (!writer) fb = Box(lo, lo), mb = Box(mlo, mlo);
      io::write_box(out, field(cfg.data.targets[i]), fb, pred32, mb);
      c0 += tch[i];
    }
    if (have_truth) {
      const Tensor t = read_sample(in, truth_fs, s, block, pred.dtype());
      // A target of zero norm has no relative error: it is reported and left out.
      double sq = 0;
      const Tensor t64 = host_converted(t, DType::f64);
      for (Index i = 0; i < t64.numel(); ++i) sq += t64.data<double>()[i] * t64.data<double>()[i];
      TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, &sq, 1, MPI_DOUBLE, MPI_SUM, mesh.comm()));
      // A NaN or Inf in the target (or values whose squares overflow) makes the sum so.
      if (!std::isfinite(sq)) {
        if (ctx.rank() == 0)
          std::cout << "sample " << s << ": the target (" << cfg.data.targets.front()
                    << (cfg.data.targets.size() > 1 ? ", ..." : "") << " in " << input
                    << ") holds a non-finite value: no relative error" << std::endl;
        continue;
      }
      if (sq == 0) {
        if (ctx.rank() == 0)
          std::cout << "sample " << s << ": the target is zero everywhere: no relative error"
                    << std::endl;
        continue;
      }
      const double e = relative_l2_loss(ShardTensor::unchecked(mesh, y.spec(), pred),
                                        ShardTensor::unchecked(mesh, y.spec(), t), false)
                           .value;
      err_sum += e;
      ++err_count;
      if (ctx.rank() == 0 && (n <= 16 || s % (n / 8) == 0))
        std::cout << "sample " << s << ": relative L2 error " << std::setprecision(4) << e
                  << std::endl;
    }
  }
  in.check_unchanged();  // every sample read from one version of the input
  out_file.commit();
  const double peak = peak_mib_max(ctx.world());
  if (ctx.rank() == 0) {
    std::cout << "tessera-infer: " << n << " samples of " << (points ? "points " : "grid ")
              << shape_str(spatial) << " on mesh " << mesh.str() << " in " << std::setprecision(3)
              << MPI_Wtime() - t_loop << " s (" << MPI_Wtime() - t0
              << " s with loading); peak memory per rank " << peak << " MiB";
    if (have_truth && err_count > 0)
      std::cout << "; mean relative L2 error " << std::setprecision(4)
                << err_sum / double(err_count);
    std::cout << "; prediction in " << output << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_reporting_errors("tessera-infer", argc, argv, run);
}
