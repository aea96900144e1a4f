// tessera-prep convert: NumPy .npy files and raw binary arrays into the schema.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

#include "apps/prep/array_source.hpp"
#include "apps/prep/common.hpp"
#include "apps/prep/npy.hpp"
#include "apps/prep/progress.hpp"
#include "io/output_file.hpp"
#include "io/pread_fully.hpp"
#include "io/sharded.hpp"
#include "io/transfer.hpp"
#include "runtime/comm/collective_error.hpp"

namespace tessera::prep {
namespace {

// The raw input's element type from --dtype: any name of float32 / float64 the library
// knows (f32, float, double, ...); nothing else.
std::size_t elem_size_of_option(const cli::Args& a) {
  DType dt = DType::i64;
  try {
    dt = dtype_from_name(a.str("dtype"));
  } catch (const Error&) {
  }
  if (dt != DType::f32 && dt != DType::f64)
    throw Error("--dtype " + a.str("dtype") + ": the input must be float32 or float64");
  return size_of(dt);
}

// The input's shape, type, byte and element order: from its .npy header, else from
// --shape, --dtype, --byte-order and --order; checked against the file's size.
ArraySource describe_input(const std::string& path, const cli::Args& a) {
  ArraySource in;
  in.path = path;
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) throw Error("cannot open '" + path + "': no such file");
  if (std::filesystem::is_directory(st))
    throw Error("'" + path + "' is a directory, not an input file (.npy or raw binary)");
  if (path.size() >= 4 && path.substr(path.size() - 4) == ".npy") {
    const NpyHeader h = read_npy_header(path);
    if (h.kind != 'f' || (h.elem_size != 4 && h.elem_size != 8))
      throw Error("'" + path + "': dtype '" + h.descr +
                  "' not supported (float32 or float64, either byte order)");
    in.shape = h.shape;
    in.offset = h.data_offset;
    in.elem = h.elem_size;
    in.big_endian = !h.little_endian;
    in.fortran = h.fortran_order;
    // The header says all of it: the options may repeat it, not contradict it.
    if (a.has("shape") && a.shape("shape") != in.shape)
      throw Error("--shape " + a.str("shape") + " contradicts '" + path + "', whose .npy header " +
                  "says " + shape_str(in.shape) + " (leave --shape out for a .npy file)");
    if (a.has("dtype") && elem_size_of_option(a) != in.elem)
      throw Error("--dtype " + a.str("dtype") + " contradicts '" + path + "', whose .npy header " +
                  "says '" + h.descr + "' (leave --dtype out for a .npy file)");
    if (a.has("byte-order") && (a.str("byte-order") == "big") != in.big_endian)
      throw Error("--byte-order " + a.str("byte-order") + " contradicts '" + path +
                  "', whose .npy header says '" + h.descr + "' (leave --byte-order out for a " +
                  ".npy file)");
    if (a.has("order") && (a.str("order") == "F") != in.fortran)
      throw Error("--order " + a.str("order") + " contradicts '" + path +
                  "', whose .npy header says fortran_order " + (in.fortran ? "True" : "False") +
                  " (leave --order out for a .npy file)");
  } else {
    if (!a.has("shape") || !a.has("dtype"))
      throw Error("'" + path + "' is raw binary: give --shape and --dtype (or use a .npy file)");
    in.shape = a.shape("shape");
    in.elem = elem_size_of_option(a);
    in.big_endian = a.str("byte-order") == "big";
    in.fortran = a.str("order") == "F";
  }
  // The byte count, refused when it overflows (a shape of absurd extents).
  std::size_t need = in.elem;
  for (Index s : in.shape)
    if (s < 0 || __builtin_mul_overflow(need, static_cast<std::size_t>(s), &need) ||
        need > static_cast<std::size_t>(std::numeric_limits<Index>::max()))
      throw Error("'" + path + "': shape " + shape_str(in.shape) + " of " +
                  std::to_string(in.elem) + "-byte values " +
                  (s < 0 ? "has a negative extent"
                         : "would need more than 2^63 bytes (the byte count overflows)"));
  need += in.offset;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw Error("cannot read '" + path + "': " + ec.message());
  if (size != need)
    throw Error("'" + path + "' has " + std::to_string(size) + " bytes, shape " +
                shape_str(in.shape) + " of " + std::to_string(in.elem) + "-byte values needs " +
                std::to_string(need));
  return in;
}

// Writes one C-order input's samples into dset, sample by sample: each rank reads its range
// [b, e) of dim `split` of every sample in runs that are contiguous in the file.
void write_c_order(const ArraySource& in, int fd, io::File& f, const std::string& dset,
                   Index first_sample, int split, Index b, Index e, MPI_Comm comm,
                   Progress& progress) {
  const std::size_t nd = in.shape.size();
  Index inner = 1, outer = 1;  // elements after the split dim; index count between N and it
  for (std::size_t d = static_cast<std::size_t>(split) + 1; d < nd; ++d) inner *= in.shape[d];
  for (int d = 1; d < split; ++d) outer *= in.shape[static_cast<std::size_t>(d)];
  std::vector<Index> local = in.shape;
  local[0] = 1;
  local[static_cast<std::size_t>(split)] = e - b;
  Tensor buf = Tensor::empty(local, DType::f32);
  std::vector<char> scratch;
  for (Index n = 0; n < in.shape[0]; ++n) {
    std::string err;
    for (Index o = 0; o < outer && err.empty() && e > b; ++o) {
      const Index first =
          (n * outer + o) * in.shape[static_cast<std::size_t>(split)] * inner + b * inner;
      err = read_run(fd, in, first, (e - b) * inner, buf.data<float>() + o * (e - b) * inner,
                     scratch);
    }
    collective_check(comm, err.empty(), err);
    Box box = Box::from_shape(in.shape);
    box.lo[0] = first_sample + n;
    box.hi[0] = first_sample + n + 1;
    box.lo[split] = b;
    box.hi[split] = e;
    io::write_box(f, dset, box, buf, Box::from_shape(local));
    progress.update(first_sample + n + 1);
  }
}

// The dim a Fortran-order input is split over the ranks along: a field's last (the
// slowest in the file: a rank's range is one contiguous run), a point cloud's P (its last,
// 3 or C, is small; one run per index of it).
int fortran_split(const ArraySource& in, const std::string& kind) {
  return kind == "field" ? static_cast<int>(in.shape.size()) - 1 : 1;
}

// Writes one Fortran-order input (column-major: the samples interleaved value by value) into
// dset. A run contiguous in the file holds every sample's values at some indices of dim
// `split` and one index of each dim after it (split at the last dim, as fortran_split does
// for fields, a rank's whole range is one run); each rank reads such runs of its range
// [b, e), at most a piece (64 MiB, or one index of `split`) at a time, turns each to
// row-major and writes it as a box spanning the samples. Every rank makes as many collective
// writes as the busiest (the others with empty boxes).
void write_fortran_order(const ArraySource& in, int fd, io::File& f, const std::string& dset,
                         Index first_sample, int split, Index b, Index e, MPI_Comm comm,
                         Progress& progress) {
  const std::size_t nd = in.shape.size(), j = static_cast<std::size_t>(split);
  Index before = 1, after = 1;  // values of the dims before `split` (N too); index count after
  for (std::size_t d = 0; d < j; ++d) before *= in.shape[d];
  for (std::size_t d = j + 1; d < nd; ++d) after *= in.shape[d];
  const Index width =
      e > b
          ? std::clamp<Index>(io::piece_bytes() / (before * static_cast<Index>(in.elem)), 1, e - b)
          : 0;
  const Index blocks = e > b ? (e - b + width - 1) / width : 0;
  const Index mine = blocks * after;
  Index calls = mine;
  TESSERA_MPI(MPI_Allreduce(&mine, &calls, 1, MPI_INT64_T, MPI_MAX, comm));
  std::vector<char> scratch;
  std::vector<float> column;
  for (Index t = 0; t < calls; ++t) {
    progress.update(first_sample + in.shape[0] * t / calls);  // samples' worth done
    Box box = Box::from_shape(in.shape);
    box.lo[0] = first_sample;
    box.hi[0] = first_sample + in.shape[0];
    std::string err;
    Tensor buf;
    if (t < mine) {
      const Index o = t / blocks, w0 = b + (t % blocks) * width, w1 = std::min(e, w0 + width);
      box.lo[j] = w0;
      box.hi[j] = w1;
      for (std::size_t d = j + 1, rest = static_cast<std::size_t>(o); d < nd; ++d) {
        const auto ext = static_cast<std::size_t>(in.shape[d]);
        box.lo[d] = static_cast<Index>(rest % ext);  // column-major: the next dim fastest
        box.hi[d] = box.lo[d] + 1;
        rest /= ext;
      }
      const Index count = before * (w1 - w0);
      column.resize(static_cast<std::size_t>(count));
      err = read_run(fd, in, before * (w0 + in.shape[j] * o), count, column.data(), scratch);
      std::vector<Index> ext(in.shape.begin(), in.shape.begin() + split);
      ext.push_back(w1 - w0);
      buf = Tensor::empty(box.shape(), DType::f32);
      if (err.empty()) fortran_to_c(column.data(), buf.data<float>(), ext);
    } else {
      box.hi[0] = box.lo[0];  // nothing left here: an empty part of the collective write
      buf = Tensor::empty(box.shape(), DType::f32);
    }
    collective_check(comm, err.empty(), err);
    io::write_box(f, dset, box, buf, Box::from_shape(box.shape()));
  }
  progress.update(first_sample + in.shape[0]);
}

int run(Context& ctx, const cli::Args& a) {
  if (a.positional().empty()) throw Error("convert needs an input file (see --help)");
  const std::string kind = a.str("kind");
  TESSERA_CHECK(a.str("byte-order") == "little" || a.str("byte-order") == "big",
                "--byte-order " << a.str("byte-order") << ": little or big");
  TESSERA_CHECK(a.str("order") == "C" || a.str("order") == "F",
                "--order " << a.str("order") << ": C (row-major) or F (column-major, Fortran)");
  const bool stack = a.flag("stack");
  std::vector<ArraySource> inputs;
  for (const std::string& path : a.positional()) {
    ArraySource one;
    collective_run(ctx.world(), [&] { one = describe_input(path, a); });  // every rank checks
    if (stack) one.shape.insert(one.shape.begin(), 1);  // one sample: the same bytes
    inputs.push_back(one);
  }
  // The inputs' samples one after the other: they agree in every extent after N.
  std::vector<Index> shape = inputs.front().shape;
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const std::vector<Index>& s = inputs[i].shape;
    TESSERA_CHECK(s.size() == shape.size() && std::equal(s.begin() + 1, s.end(), shape.begin() + 1),
                  "'" << inputs[i].path << "' has shape " << shape_str(s) << ", '"
                      << inputs.front().path << "' " << shape_str(inputs.front().shape)
                      << ": the inputs' samples are joined, so every extent after N must agree"
                      << (stack ? "" : " (files of one sample each, without N: --stack)"));
    shape[0] += s[0];
  }
  const std::string src = inputs.size() == 1 ? inputs.front().path
                                             : inputs.front().path + "' ... '" + inputs.back().path;
  const std::size_t nd = shape.size();
  // Refused here, before any file is written, what the schema's validation would refuse;
  // zero samples (an empty split) only when asked for: training and inference refuse them.
  for (std::size_t d = 0; d < nd; ++d)
    TESSERA_CHECK(shape[d] >= 1 || (d == 0 && a.flag("allow-empty")),
                  "'" << src << "' has shape " << shape_str(shape)
                      << ": every extent must be at least 1"
                      << (d == 0 ? " (no samples: --allow-empty writes such a file)" : ""));
  std::string dset;
  if (kind == "field") {
    TESSERA_CHECK(nd >= 3 && nd <= 5, "'" << src << "' has shape " << shape_str(shape)
                                          << ": a field needs (N, C, spatial...) with 1 to 3 "
                                             "spatial dims");
    const std::string name = a.str("name");
    TESSERA_CHECK(
        !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
        "--name '" << name << "': a field name is one non-empty word without '/'");
    dset = std::string(io::schema::kFields) + "/" + name;
  } else if (kind == "coords" || kind == "features") {
    TESSERA_CHECK(nd == 3 && (kind == "features" || shape[2] == 3),
                  "'" << src << "' has shape " << shape_str(shape) << ": " << kind
                      << " need (N, P, " << (kind == "coords" ? "3" : "C") << ")");
    dset = kind == "coords" ? io::schema::kCoords : io::schema::kFeatures;
  } else {
    throw Error("--kind " + kind + ": field, coords or features");
  }
  const std::string out = a.str("out");
  const bool append = a.flag("append");
  std::vector<std::pair<std::string, std::string>> named;
  for (const ArraySource& in : inputs) named.push_back({"the input", in.path});
  io::refuse_alias(ctx.world(), "--out", out, named);
  if (append) {  // said here, not as the copy's file-system error naming both paths
    std::error_code ec;
    const auto st = std::filesystem::status(out, ec);
    collective_check(ctx.world(), std::filesystem::exists(st),
                     "--append: '" + out + "', the file to append to, does not exist");
    collective_check(ctx.world(), !std::filesystem::is_directory(st),
                     "--append: '" + out + "' is a directory, not an HDF5 file to append to");
    // Read-only first: parallel HDF5 allocates (and fills) the storage of a dataset never
    // written when a writable file opens it - a declared-only dataset of terabytes would be
    // written out in the copy.
    const io::File r = io::File::open(out, ctx.world());
    for (const std::string& d : r.datasets())
      TESSERA_CHECK(io::storage_allocated(r, d),
                    "--append: " << r.where(d) << " holds no written data (never allocated): "
                                 << "appending would allocate and fill it; write it first");
  }
  // Written under a temporary name, renamed when complete: a failure leaves `out` as it was
  // (--append works on a copy of it).
  io::NewFile output(out, ctx.world(),
                     append ? io::NewFile::Start::CopyOfPath : io::NewFile::Start::Empty);
  io::File& f = output.file();
  if (!append) io::schema::write_root(f, "tessera-prep convert");
  // Each sample is split over the ranks along its largest dim after N (the chunks follow), a
  // Fortran-order input's along fortran_split.
  int split = 1;
  for (std::size_t d = 2; d < nd; ++d)
    if (shape[d] > shape[static_cast<std::size_t>(split)]) split = static_cast<int>(d);
  const int c_split = split;
  if (inputs.front().fortran) split = fortran_split(inputs.front(), kind);
  std::vector<Index> chunk = shape;
  chunk[0] = 1;
  chunk[static_cast<std::size_t>(split)] = std::max<Index>(
      1, io::balanced_range(shape[static_cast<std::size_t>(split)], ctx.size(), 0).second);
  // Named by the output's own name, not the temporary copy's.
  collective_check(ctx.world(), !f.exists(dset),
                   "--append: '" + out + "' holds '" + dset + "' already" +
                       (kind == "field" ? " (give another --name)" : ""));
  // The schema's one N (and one P for a point cloud) over all datasets, said before writing.
  for (const std::string& d : append ? f.datasets("/") : std::vector<std::string>{}) {
    const std::vector<Index> s = f.info(d).shape;
    const bool same_points =
        kind != "field" && (d == io::schema::kCoords || d == io::schema::kFeatures);
    TESSERA_CHECK(s.empty() || s[0] == shape[0],
                  "--append: '" << out << "' holds " << s[0] << " samples (dataset '" << d
                                << "'), '" << src << "' " << shape[0]
                                << ": every dataset of a file has the same N");
    TESSERA_CHECK(!same_points || s.size() < 2 || s[1] == shape[1],
                  "--append: '" << out << "' holds " << s[1] << " points per sample (dataset '" << d
                                << "'), '" << src << "' " << shape[1]
                                << ": coords and features share P");
  }
  f.create_dataset(dset, shape, DType::f32, chunk);
  const Index C = shape[kind == "field" ? 1 : 2];
  std::vector<std::string> vars;
  if (a.has("variables")) {
    vars = a.list("variables");
  } else {
    for (Index c = 0; c < C; ++c) vars.push_back(std::string("c").append(std::to_string(c)));
  }
  TESSERA_CHECK(static_cast<Index>(vars.size()) == C,
                "--variables names " << vars.size() << " channels, the data has " << C);
  TESSERA_CHECK(kind != "features" || std::find(vars.begin(), vars.end(), "coords") == vars.end(),
                "--variables: 'coords' is the name of /points/coords (--kind coords); a feature "
                "named so could never be chosen as a model input or target");
  if (kind != "coords") f.set_attr(dset, "variables", vars);
  if (kind == "field") {
    io::schema::GridMeta m;
    m.variables = vars;
    if (a.has("spacing")) m.spacing = a.numbers("spacing");
    if (a.has("extent")) m.extent = a.numbers("extent");
    TESSERA_CHECK((m.spacing.empty() || m.spacing.size() == nd - 2) &&
                      (m.extent.empty() || m.extent.size() == nd - 2),
                  "--spacing and --extent need " << nd - 2 << " numbers");
    // One given: the other follows (n cells of the spacing fill the extent); neither: the
    // unit cube.
    for (std::size_t d = 2; d < nd; ++d) {
      const auto n = static_cast<double>(shape[d]);
      if (!a.has("spacing")) m.spacing.push_back((a.has("extent") ? m.extent[d - 2] : 1.0) / n);
      if (!a.has("extent")) m.extent.push_back(m.spacing[d - 2] * n);
    }
    io::schema::write_grid_meta(f, dset, m);
  }
  // What the schema would refuse of the metadata (a spacing that overruns the extent, a
  // name twice, a negative or infinite number) is refused before the values are written.
  std::vector<std::string> problems = io::schema::validate(f, {}, false);
  if (a.flag("allow-empty"))  // asked for: the one rule it breaks on purpose
    std::erase_if(problems, [](const std::string& p) {
      return p.find("holds 0 samples") != std::string::npos;
    });
  if (!problems.empty()) {
    std::string why = problems.front();  // the same on every rank
    const std::string tmp = "'" + output.temp() + "'";
    for (std::size_t at; (at = why.find(tmp)) != std::string::npos;)
      why.replace(at, tmp.size(), "'" + out + "'");
    throw Error(why + " (nothing written)");
  }
  // Each input's samples in turn, each rank reading its range of dim `split` of them with
  // pread in runs contiguous in the file.
  Index sample_elems = 1;
  for (std::size_t d = 1; d < nd; ++d) sample_elems *= shape[d];
  Progress progress(ctx.world(), "convert", shape[0],
                    static_cast<double>(sample_elems * static_cast<Index>(inputs.front().elem)),
                    a.flag("quiet"));
  Index first_sample = 0;
  for (const ArraySource& in : inputs) {
    if (in.shape[0] == 0) continue;  // an empty part of the join
    const int s = in.fortran ? fortran_split(in, kind) : c_split;
    const auto [b, e] =
        io::balanced_range(shape[static_cast<std::size_t>(s)], ctx.size(), ctx.rank());
    const int fd = ::open(in.path.c_str(), O_RDONLY);
    collective_check(ctx.world(), fd >= 0, "cannot open '" + in.path + "'");
    try {
      if (in.fortran)
        write_fortran_order(in, fd, f, dset, first_sample, s, b, e, ctx.world(), progress);
      else
        write_c_order(in, fd, f, dset, first_sample, s, b, e, ctx.world(), progress);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    first_sample += in.shape[0];
  }
  output.commit();
  if (ctx.rank() == 0 && !a.flag("quiet"))
    std::cerr << "[convert] " << src << " -> " << out << ":" << dset << " " << shape_str(shape)
              << " float32" << std::endl;
  return 0;
}

}  // namespace

Command convert_command() {
  return {
      "convert",
      "tessera-prep convert IN.npy|IN.raw [MORE...] --out F.h5 --name NAME [--kind field] "
      "[--stack] [--shape S --dtype T]",
      "Converts NumPy .npy files or raw binary arrays (give --shape and --dtype) into the\n"
      "schema, stored as float32: float32 or float64, little- or big-endian, row-major (C)\n"
      "or column-major (Fortran) order, as a .npy header says or --byte-order and --order.\n"
      "Several inputs are joined along the sample dim N in the order given (they agree in\n"
      "every other extent); with --stack each input is one sample without N: (C, spatial...).\n"
      "--kind field writes /fields/NAME of shape (N, C, spatial...); coords and features\n"
      "write /points/coords (N, P, 3) and /points/features (N, P, C). Each rank reads and\n"
      "writes its own part of every sample.",
      {{"out", "FILE", "output HDF5 file", ""},
       {"name", "NAME", "field name (for --kind field)", "u"},
       {"kind", "KIND", "field, coords or features", "field"},
       {"stack", "", "each input is one sample, its shape without N", ""},
       {"shape", "S", "shape of raw input, e.g. 4,1,64,64", ""},
       {"dtype", "T", "element type of raw input: float32 or float64", ""},
       {"byte-order", "B", "byte order of raw input: little or big", "little"},
       {"order", "O", "element order of raw input: C (row-major) or F (column-major)", "C"},
       {"variables", "A,B", "channel names", ""},
       {"spacing", "X,Y", "grid spacing per spatial dim (default: extent / points)", ""},
       {"extent", "X,Y", "domain extent per spatial dim (default: spacing x points, or 1)", ""},
       {"append", "", "add to an existing file instead of creating it", ""},
       {"allow-empty", "", "write zero samples (an empty split; train and infer refuse it)", ""},
       {"quiet", "", "no progress output", ""}},
      run};
}

}  // namespace tessera::prep
