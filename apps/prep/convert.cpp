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

struct Input {
  std::vector<Index> shape;
  std::size_t offset = 0, elem = 4;
  bool is_double = false;
};

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

Input describe_input(const std::string& path, const cli::Args& a) {
  Input in;
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) throw Error("cannot open '" + path + "': no such file");
  if (std::filesystem::is_directory(st))
    throw Error("'" + path + "' is a directory, not an input file (.npy or raw binary)");
  if (path.size() >= 4 && path.substr(path.size() - 4) == ".npy") {
    const NpyHeader h = read_npy_header(path);
    if (h.fortran_order)
      throw Error("'" + path + "': Fortran-order arrays are not supported (save C order)");
    if (!h.little_endian || h.kind != 'f' || (h.elem_size != 4 && h.elem_size != 8))
      throw Error("'" + path + "': dtype '" + h.descr +
                  "' not supported (little-endian float32 or float64)");
    in.shape = h.shape;
    in.offset = h.data_offset;
    in.elem = h.elem_size;
    // The header says both: --shape and --dtype may repeat it, not contradict it.
    if (a.has("shape") && a.shape("shape") != in.shape)
      throw Error("--shape " + a.str("shape") + " contradicts '" + path + "', whose .npy header " +
                  "says " + shape_str(in.shape) + " (leave --shape out for a .npy file)");
    if (a.has("dtype") && elem_size_of_option(a) != in.elem)
      throw Error("--dtype " + a.str("dtype") + " contradicts '" + path + "', whose .npy header " +
                  "says '" + h.descr + "' (leave --dtype out for a .npy file)");
  } else {
    if (!a.has("shape") || !a.has("dtype"))
      throw Error("'" + path + "' is raw binary: give --shape and --dtype (or use a .npy file)");
    in.shape = a.shape("shape");
    in.elem = elem_size_of_option(a);
  }
  in.is_double = in.elem == 8;
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

int run(Context& ctx, const cli::Args& a) {
  if (a.positional().size() != 1) throw Error("convert needs one input file (see --help)");
  const std::string src = a.positional()[0], kind = a.str("kind");
  Input in;
  collective_run(ctx.world(), [&] { in = describe_input(src, a); });  // every rank checks
  const std::size_t nd = in.shape.size();
  // Refused here, before any file is written, what the schema's validation would refuse;
  // zero samples (an empty split) only when asked for: training and inference refuse them.
  for (std::size_t d = 0; d < nd; ++d)
    TESSERA_CHECK(in.shape[d] >= 1 || (d == 0 && a.flag("allow-empty")),
                  "'" << src << "' has shape " << shape_str(in.shape)
                      << ": every extent must be at least 1"
                      << (d == 0 ? " (no samples: --allow-empty writes such a file)" : ""));
  std::string dset;
  if (kind == "field") {
    TESSERA_CHECK(nd >= 3 && nd <= 5, "'" << src << "' has shape " << shape_str(in.shape)
                                          << ": a field needs (N, C, spatial...) with 1 to 3 "
                                             "spatial dims");
    const std::string name = a.str("name");
    TESSERA_CHECK(
        !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
        "--name '" << name << "': a field name is one non-empty word without '/'");
    dset = std::string(io::schema::kFields) + "/" + name;
  } else if (kind == "coords" || kind == "features") {
    TESSERA_CHECK(nd == 3 && (kind == "features" || in.shape[2] == 3),
                  "'" << src << "' has shape " << shape_str(in.shape) << ": " << kind
                      << " need (N, P, " << (kind == "coords" ? "3" : "C") << ")");
    dset = kind == "coords" ? io::schema::kCoords : io::schema::kFeatures;
  } else {
    throw Error("--kind " + kind + ": field, coords or features");
  }
  const std::string out = a.str("out");
  const bool append = a.flag("append");
  io::refuse_alias(ctx.world(), "--out", out, {{"the input", src}});
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
  // Each sample is split over the ranks along its largest dim after N.
  int split = 1;
  for (std::size_t d = 2; d < nd; ++d)
    if (in.shape[d] > in.shape[static_cast<std::size_t>(split)]) split = static_cast<int>(d);
  std::vector<Index> chunk = in.shape;
  chunk[0] = 1;
  chunk[static_cast<std::size_t>(split)] = std::max<Index>(
      1, io::balanced_range(in.shape[static_cast<std::size_t>(split)], ctx.size(), 0).second);
  // Named by the output's own name, not the temporary copy's.
  collective_check(ctx.world(), !f.exists(dset),
                   "--append: '" + out + "' holds '" + dset + "' already" +
                       (kind == "field" ? " (give another --name)" : ""));
  // The schema's one N (and one P for a point cloud) over all datasets, said before writing.
  for (const std::string& d : append ? f.datasets("/") : std::vector<std::string>{}) {
    const std::vector<Index> s = f.info(d).shape;
    const bool same_points =
        kind != "field" && (d == io::schema::kCoords || d == io::schema::kFeatures);
    TESSERA_CHECK(s.empty() || s[0] == in.shape[0],
                  "--append: '" << out << "' holds " << s[0] << " samples (dataset '" << d
                                << "'), '" << src << "' " << in.shape[0]
                                << ": every dataset of a file has the same N");
    TESSERA_CHECK(!same_points || s.size() < 2 || s[1] == in.shape[1],
                  "--append: '" << out << "' holds " << s[1] << " points per sample (dataset '" << d
                                << "'), '" << src << "' " << in.shape[1]
                                << ": coords and features share P");
  }
  f.create_dataset(dset, in.shape, DType::f32, chunk);
  const Index C = in.shape[kind == "field" ? 1 : 2];
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
      const auto n = static_cast<double>(in.shape[d]);
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
  // Read this rank's box of each sample with pread, one call per contiguous run.
  const int fd = ::open(src.c_str(), O_RDONLY);
  collective_check(ctx.world(), fd >= 0, "cannot open '" + src + "'");
  const auto [b, e] =
      io::balanced_range(in.shape[static_cast<std::size_t>(split)], ctx.size(), ctx.rank());
  Index inner = 1, outer = 1;  // elements after the split dim; index count between N and it
  for (std::size_t d = static_cast<std::size_t>(split) + 1; d < nd; ++d) inner *= in.shape[d];
  for (int d = 1; d < split; ++d) outer *= in.shape[static_cast<std::size_t>(d)];
  std::vector<Index> local = in.shape;
  local[0] = 1;
  local[static_cast<std::size_t>(split)] = e - b;
  Tensor buf = Tensor::empty(local, DType::f32);
  std::vector<char> raw(static_cast<std::size_t>((e - b) * inner) * in.elem);
  Index sample_elems = 1;
  for (std::size_t d = 1; d < nd; ++d) sample_elems *= in.shape[d];
  Progress progress(ctx.world(), "convert", in.shape[0],
                    static_cast<double>(sample_elems * static_cast<Index>(in.elem)),
                    a.flag("quiet"));
  for (Index n = 0; n < in.shape[0]; ++n) {
    std::string err;
    for (Index o = 0; o < outer && err.empty() && e > b; ++o) {
      const Index first =
          (n * outer + o) * in.shape[static_cast<std::size_t>(split)] * inner + b * inner;
      const std::size_t bytes = raw.size();
      const std::size_t got = io::pread_fully(
          fd, raw.data(), bytes, in.offset + static_cast<std::size_t>(first) * in.elem);
      if (got != bytes) {
        err = "short read from '" + src + "' (" + std::to_string(got) + " of " +
              std::to_string(bytes) + " bytes at this rank's part of sample " + std::to_string(n) +
              ")";
        break;
      }
      float* dst = buf.data<float>() + o * (e - b) * inner;
      const Index cnt = (e - b) * inner;
      if (in.is_double)
        for (Index i = 0; i < cnt; ++i) {
          double v;
          std::memcpy(&v, raw.data() + 8 * i, 8);
          dst[i] = static_cast<float>(v);
        }
      else
        std::memcpy(dst, raw.data(), static_cast<std::size_t>(cnt) * 4);
      // The schema holds finite float32: NaN, Inf and float64 past 3.4e38 are refused.
      for (Index i = 0; i < cnt && err.empty(); ++i)
        if (!std::isfinite(dst[i])) {
          const Index at = first + i;
          double v = dst[i];
          if (in.is_double) std::memcpy(&v, raw.data() + 8 * i, 8);
          std::ostringstream os;
          os << std::setprecision(17) << "'" << src << "': value " << v << " at flat index " << at
             << " (sample " << n
             << ") is not a finite float32: the schema takes finite values only";
          err = os.str();
        }
    }
    collective_check(ctx.world(), err.empty(), err);
    Box box = Box::from_shape(in.shape);
    box.lo[0] = n;
    box.hi[0] = n + 1;
    box.lo[split] = b;
    box.hi[split] = e;
    io::write_box(f, dset, box, buf, Box::from_shape(local));
    progress.update(n + 1);
  }
  if (fd >= 0) ::close(fd);
  output.commit();
  if (ctx.rank() == 0 && !a.flag("quiet"))
    std::cerr << "[convert] " << src << " -> " << out << ":" << dset << " " << shape_str(in.shape)
              << " float32" << std::endl;
  return 0;
}

}  // namespace

Command convert_command() {
  return {
      "convert",
      "tessera-prep convert IN.npy|IN.raw --out F.h5 --name NAME [--kind field] [--shape S "
      "--dtype T]",
      "Converts a NumPy .npy file (C order, little-endian float32/float64) or a raw binary\n"
      "array (give --shape and --dtype) into the schema, stored as float32. --kind field\n"
      "writes /fields/NAME of shape (N, C, spatial...); coords and features write\n"
      "/points/coords (N, P, 3) and /points/features (N, P, C). Each rank reads and writes\n"
      "its own part of every sample.",
      {{"out", "FILE", "output HDF5 file", ""},
       {"name", "NAME", "field name (for --kind field)", "u"},
       {"kind", "KIND", "field, coords or features", "field"},
       {"shape", "S", "shape of raw input, e.g. 4,1,64,64", ""},
       {"dtype", "T", "element type of raw input: float32 or float64", ""},
       {"variables", "A,B", "channel names", ""},
       {"spacing", "X,Y", "grid spacing per spatial dim (default: extent / points)", ""},
       {"extent", "X,Y", "domain extent per spatial dim (default: spacing x points, or 1)", ""},
       {"append", "", "add to an existing file instead of creating it", ""},
       {"allow-empty", "", "write zero samples (an empty split; train and infer refuse it)", ""},
       {"quiet", "", "no progress output", ""}},
      run};
}

}  // namespace tessera::prep
