#include "io/file.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decomp/error.hpp"
#include "io/h5_types.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/bounded_failure.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::io {
namespace {

using h5::check;
using h5::Handle;

std::vector<std::string> split_path(const std::string& p) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : p) {
    if (c == '/') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  return parts;
}

std::string absolute(const std::string& p) {
  return p.empty() || p[0] != '/' ? "/" + p : p;
}

// Every link whose target is a dataset: hard links, and soft and external links too (the
// readers follow them, so a listing that skipped them let validate pass a field training
// then found a NaN in). A dangling link leads nowhere: skipped.
herr_t collect_dataset(hid_t group, const char* name, const H5L_info_t*, void* out) {
  H5O_info_t info;
  if (H5Oget_info_by_name(group, name, &info, H5P_DEFAULT) >= 0 && info.type == H5O_TYPE_DATASET)
    static_cast<std::vector<std::string>*>(out)->push_back(std::string(name));
  return 0;
}

herr_t collect_attr(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

std::vector<Index> dims_of(hid_t space) {
  const int nd = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> d(static_cast<std::size_t>(std::max(nd, 0)));
  if (nd > 0) H5Sget_simple_extent_dims(space, d.data(), nullptr);
  return {d.begin(), d.end()};
}

}  // namespace

File::~File() {
  if (!h_.valid() || std::uncaught_exceptions() == 0) return;
  const std::string why = last_error_message();  // the error unwinding (a tessera::Error)
  const failure::Watch watch(
      "closing '" + path_ + "' after " +
      (why.empty() ? std::string("an error on this rank") : "the error: " + why));
  h_.reset();
}

struct File::Opened {
  int fd = -1;
  struct stat st {};
  ~Opened() {
    if (fd >= 0) ::close(fd);
  }
};

File File::open(const std::string& path, MPI_Comm comm, Mode mode) {
  File f;
  f.h_ = h5::open_parallel(path, comm, mode);
  f.path_ = path;
  f.comm_ = comm;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (mode == Mode::Read && rank == 0) {
    auto o = std::make_shared<Opened>();
    o->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (o->fd >= 0 && ::fstat(o->fd, &o->st) == 0) f.opened_ = std::move(o);
  }
  return f;
}

void File::check_unchanged() const {
  std::string why;
  if (opened_) {
    struct stat now {};
    if (::fstat(opened_->fd, &now) == 0 &&
        (now.st_size != opened_->st.st_size || now.st_mtim.tv_sec != opened_->st.st_mtim.tv_sec ||
         now.st_mtim.tv_nsec != opened_->st.st_mtim.tv_nsec))
      why = "'" + path_ + "' changed while it was read (" +
            (now.st_size != opened_->st.st_size
                 ? "its size went from " + std::to_string(opened_->st.st_size) + " to " +
                       std::to_string(now.st_size) + " bytes"
                 : std::string("it was modified")) +
            "): the values read may mix old and new; run again on a file that stays put";
  }
  why = broadcast_string(comm_, why);
  if (!why.empty()) throw Error(why);
}

File File::create(const std::string& path, MPI_Comm comm) {
  return open(path, comm, Mode::Create);
}

std::string File::where(const std::string& dset) const {
  return "dataset '" + absolute(dset) + "' in '" + path_ + "'";
}

bool File::exists(const std::string& path) const {
  std::string cur;
  for (const std::string& part : split_path(path)) {
    cur += "/" + part;
    const htri_t e = H5Lexists(id(), cur.c_str(), H5P_DEFAULT);
    if (e <= 0) return false;
  }
  return true;
}

std::string File::external_link_on(const std::string& path) const {
  // The file the object lies in, as HDF5 reaches it: through soft and external links alike.
  const auto file_of = [](hid_t h) {
    const ssize_t n = H5Fget_name(h, nullptr, 0);
    std::string name(static_cast<std::size_t>(std::max<ssize_t>(n, 0)), '\0');
    if (n > 0) H5Fget_name(h, name.data(), static_cast<std::size_t>(n) + 1);
    return name;
  };
  const hid_t o = H5Oopen(id(), absolute(path).c_str(), H5P_DEFAULT);
  if (o < 0) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  const std::string theirs = file_of(o), mine = file_of(id());
  H5Oclose(o);
  if (theirs == mine) return "";
  // The external link on the way, where the path itself holds one (else a soft link leads
  // through one elsewhere).
  std::string cur, via = "links on the way to it";
  for (const std::string& part : split_path(path)) {
    cur += "/" + part;
    H5L_info_t info{};
    if (H5Lget_info(id(), cur.c_str(), &info, H5P_DEFAULT) >= 0 && info.type == H5L_TYPE_EXTERNAL) {
      via = "the external link '" + cur + "'";
      break;
    }
  }
  H5Eclear2(H5E_DEFAULT);
  return "the file '" + theirs + "' (through " + via + ")";
}

std::vector<std::string> File::datasets(const std::string& group) const {
  std::vector<std::string> rel;
  check(H5Lvisit(id(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &rel),
        "listing datasets of '" + path_ + "'", 0);
  std::vector<std::string> out;
  const std::string g = absolute(group);
  for (const std::string& r : rel) {
    const std::string a = "/" + r;
    if (g == "/" || a.rfind(g + "/", 0) == 0) out.push_back(a);
  }
  return out;
}

Handle File::open_object(const std::string& obj) const {
  if (!exists(obj)) throw Error("no object '" + absolute(obj) + "' in '" + path_ + "'");
  return Handle(check(H5Oopen(id(), absolute(obj).c_str(), H5P_DEFAULT),
                      "opening '" + absolute(obj) + "' in '" + path_ + "'"));
}

DatasetInfo File::info(const std::string& dset) const {
  if (!exists(dset)) throw Error("missing " + where(dset));
  Handle d(check(H5Dopen2(id(), absolute(dset).c_str(), h5::dataset_access()),
                 "opening " + where(dset)));
  if (H5Iget_type(d.get()) != H5I_DATASET) throw Error(where(dset) + " is not a dataset");
  DatasetInfo in;
  in.name = absolute(dset);
  Handle space(check(H5Dget_space(d.get()), "dataspace of " + where(dset)));
  in.shape = dims_of(space.get());
  Handle type(check(H5Dget_type(d.get()), "type of " + where(dset)));
  in.dtype = h5::dtype_of_file_type(type.get());
  in.type_name = h5::file_type_name(type.get());
  Handle dcpl(check(H5Dget_create_plist(d.get()), "creation properties of " + where(dset)));
  if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> c(in.shape.size());
    H5Pget_chunk(dcpl.get(), static_cast<int>(c.size()), c.data());
    in.chunk.assign(c.begin(), c.end());
  }
  const int nf = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < nf; ++i) {
    unsigned flags = 0;
    size_t nelem = 0;
    char name[64] = {};
    H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelem, nullptr, sizeof name, name,
                   nullptr);
    in.filters.push_back(name);
  }
  return in;
}

Handle File::open_dataset(const std::string& dset, std::optional<DType> dtype,
                          const std::vector<Index>& shape) const {
  const DatasetInfo in = info(dset);  // throws "missing dataset ..." first
  if (dtype && in.dtype != dtype)
    throw Error(where(dset) + " holds " + in.type_name + ", expected " + name_of(*dtype));
  if (!shape.empty()) {
    if (in.shape.size() != shape.size())
      throw Error(where(dset) + " has rank " + std::to_string(in.shape.size()) + " " +
                  shape_str(in.shape) + ", expected rank " + std::to_string(shape.size()) + " " +
                  shape_str(shape));
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (shape[d] >= 0 && shape[d] != in.shape[d])
        throw Error(where(dset) + " has shape " + shape_str(in.shape) + ", expected " +
                    shape_str(shape) + " (dim " + std::to_string(d) + " differs)");
  }
  return Handle(check(H5Dopen2(id(), absolute(dset).c_str(), h5::dataset_access()),
                      "opening " + where(dset)));
}

std::vector<Index> chunk_within_hdf5_limit(std::vector<Index> chunk, std::size_t elem_size) {
  constexpr double kLimit = 4294967296.0;  // H5Pset_chunk: a chunk must be below 4 GiB
  const auto bytes = [&] {
    double b = static_cast<double>(elem_size);
    for (Index c : chunk) b *= static_cast<double>(c);
    return b;
  };
  while (bytes() >= kLimit) {
    auto largest = std::max_element(chunk.begin(), chunk.end());
    if (largest == chunk.end() || *largest <= 1) break;  // one element: nothing to halve
    *largest = (*largest + 1) / 2;
  }
  return chunk;
}

void File::create_dataset(const std::string& dset, const std::vector<Index>& shape, DType dtype,
                          const std::vector<Index>& chunk) {
  // The dataset is allocated whole at creation (below): one that cannot fit the file
  // system is refused now, not after it has filled the disk. The datasets created before it
  // reach the disk as they are written: what they still need counts too (the bytes this
  // handle created less the file's blocks on disk).
  double bytes = static_cast<double>(size_of(dtype));
  for (Index e : shape) bytes *= static_cast<double>(e);
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  double room_bytes[2] = {0, 0};  // free; still to be written of the earlier datasets
  if (rank == 0) {
    std::error_code ec;
    const auto dir = std::filesystem::absolute(path_, ec).parent_path();
    const auto sp = std::filesystem::space(dir, ec);
    room_bytes[0] = ec ? -1.0 : static_cast<double>(sp.available);  // -1: unknown, unchecked
    struct stat st {};
    const double on_disk =
        ::stat(path_.c_str(), &st) == 0 ? 512.0 * static_cast<double>(st.st_blocks) : 0.0;
    room_bytes[1] = std::max(0.0, created_bytes_ - on_disk);
  }
  MPI_Bcast(room_bytes, 2, MPI_DOUBLE, 0, comm_);
  const double free_bytes = room_bytes[0], pending = room_bytes[1];
  std::ostringstream room;
  if (free_bytes >= 0 && bytes + pending > free_bytes) {
    // In the unit that shows the figure (a small disk in KiB, not 3.4e-05 GiB).
    const auto amount = [](double b) {
      std::ostringstream o;
      o << std::setprecision(3);
      if (b >= double(1 << 30))
        o << b / double(1 << 30) << " GiB";
      else if (b >= double(1 << 20))
        o << b / double(1 << 20) << " MiB";
      else
        o << b / 1024.0 << " KiB";
      return o.str();
    };
    room << where(dset) << " of shape " << shape_str(shape) << " needs " << amount(bytes)
         << ", the file system has " << amount(free_bytes) << " free";
    if (pending > 0)
      room << " (" << amount(bytes + pending)
           << " needed with the datasets created before it and not yet written)";
  }
  TESSERA_CHECK(room.str().empty(), room.str());
  created_bytes_ += bytes;
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                     "dataspace for " + where(dset)));
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate(dataset create)"));
  // Parallel HDF5 allocates space at creation; writing fill values would cost a full
  // pass over the file that the data write repeats.
  check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time", 0);
  check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time", 0);
  if (!chunk.empty()) {
    TESSERA_CHECK(chunk.size() == shape.size(), "chunk " << shape_str(chunk) << " for "
                                                         << where(dset) << " of rank "
                                                         << shape.size());
    const std::vector<Index> fit = chunk_within_hdf5_limit(chunk, size_of(dtype));
    std::vector<hsize_t> c(fit.begin(), fit.end());
    check(H5Pset_chunk(dcpl.get(), static_cast<int>(c.size()), c.data()),
          "chunking " + where(dset) + " by " + shape_str(fit), 0);
  }
  Handle lcpl(check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate(link create)"));
  check(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group", 0);
  Handle d(check(H5Dcreate2(id(), absolute(dset).c_str(), h5::native_type(dtype), space.get(),
                            lcpl.get(), dcpl.get(), H5P_DEFAULT),
                 "creating " + where(dset) + " of shape " + shape_str(shape)));
}

// ---- attributes ----

namespace {
void replace_attr(hid_t obj, const std::string& name) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
}
// Variable-length strings of a character set: UTF-8 as Tessera writes them; reading takes
// the file's set (HDF5 converts neither way: h5py writes a list of bytes as ASCII).
Handle vlen_string_type(H5T_cset_t cset = H5T_CSET_UTF8) {
  Handle t(check(H5Tcopy(H5T_C_S1), "H5Tcopy"));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), cset);
  return t;
}
}  // namespace

void File::set_attr(const std::string& obj, const std::string& name, const std::vector<double>& v) {
  Handle o = open_object(obj);
  replace_attr(o.get(), name);
  const hsize_t n = v.size();
  Handle space(check(H5Screate_simple(1, &n, nullptr), "attribute dataspace"));
  Handle a(check(
      H5Acreate2(o.get(), name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      "creating attribute '" + name + "' of " + where(obj)));
  check(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, v.data()), "writing attribute " + name, 0);
}

void File::set_attr(const std::string& obj, const std::string& name, std::int64_t v) {
  Handle o = open_object(obj);
  replace_attr(o.get(), name);
  Handle space(check(H5Screate(H5S_SCALAR), "attribute dataspace"));
  Handle a(
      check(H5Acreate2(o.get(), name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
            "creating attribute '" + name + "' of " + where(obj)));
  check(H5Awrite(a.get(), H5T_NATIVE_INT64, &v), "writing attribute " + name, 0);
}

void File::set_attr(const std::string& obj, const std::string& name, const std::string& v) {
  Handle o = open_object(obj);
  replace_attr(o.get(), name);
  Handle type = vlen_string_type();
  Handle space(check(H5Screate(H5S_SCALAR), "attribute dataspace"));
  Handle a(
      check(H5Acreate2(o.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
            "creating attribute '" + name + "' of " + where(obj)));
  const char* p = v.c_str();
  check(H5Awrite(a.get(), type.get(), &p), "writing attribute " + name, 0);
}

void File::set_attr(const std::string& obj, const std::string& name,
                    const std::vector<std::string>& v) {
  Handle o = open_object(obj);
  replace_attr(o.get(), name);
  Handle type = vlen_string_type();
  const hsize_t n = v.size();
  Handle space(check(H5Screate_simple(1, &n, nullptr), "attribute dataspace"));
  Handle a(
      check(H5Acreate2(o.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
            "creating attribute '" + name + "' of " + where(obj)));
  std::vector<const char*> ptrs;
  for (const auto& s : v) ptrs.push_back(s.c_str());
  check(H5Awrite(a.get(), type.get(), ptrs.data()), "writing attribute " + name, 0);
}

bool File::has_attr(const std::string& obj, const std::string& name) const {
  if (!exists(obj)) return false;
  Handle o = open_object(obj);
  return H5Aexists(o.get(), name.c_str()) > 0;
}

std::vector<std::string> File::attr_names(const std::string& obj) const {
  Handle o = open_object(obj);
  // HDF5 1.10's H5Aiterate2 copies compact attributes into a table; when a message fails to
  // decode part-way it closes the table's never-filled slots (stale pointers), freeing
  // attributes the cached object header still owns, and the file's close segfaults.
  // H5Aexists of a name no attribute has decodes every message without that table and fails
  // cleanly on a damaged one; once it says no, the iteration cannot fail so.
  const htri_t probe = H5Aexists(o.get(), "\x01tessera: no attribute has this name");
  check(probe == 0 ? 0 : -1,
        "listing attributes of '" + absolute(obj) + "' in '" + path_ + "' (damaged)", 0);
  std::vector<std::string> names;
  hsize_t idx = 0;
  check(H5Aiterate2(o.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr, &names),
        "listing attributes of '" + obj + "'", 0);
  return names;
}

namespace {
Handle open_attr(const File& f, hid_t obj, const std::string& objname, const std::string& name) {
  if (H5Aexists(obj, name.c_str()) <= 0)
    throw Error("missing attribute '" + name + "' on '" + objname + "' in '" + f.path() + "'");
  return Handle(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "opening attribute " + name));
}
}  // namespace

bool File::attr_is_string(const std::string& obj, const std::string& name) const {
  Handle o = open_object(obj);
  Handle a = open_attr(*this, o.get(), obj, name);
  Handle t(check(H5Aget_type(a.get()), "attribute type"));
  return H5Tget_class(t.get()) == H5T_STRING;
}

std::vector<double> File::attr_doubles(const std::string& obj, const std::string& name) const {
  Handle o = open_object(obj);
  Handle a = open_attr(*this, o.get(), obj, name);
  Handle t(check(H5Aget_type(a.get()), "attribute type"));
  const H5T_class_t c = H5Tget_class(t.get());
  if (c != H5T_FLOAT && c != H5T_INTEGER)
    throw Error("attribute '" + name + "' on '" + obj + "' in '" + path_ + "' is not numeric");
  Handle space(check(H5Aget_space(a.get()), "attribute dataspace"));
  const hssize_t n =
      check(H5Sget_simple_extent_npoints(space.get()),
            "the extent of attribute '" + name + "' of '" + absolute(obj) + "' in '" + path_ + "'");
  std::vector<double> v(static_cast<std::size_t>(n));
  // An empty attribute (a null dataspace, h5py.Empty) holds no value: none read, and the
  // callers' counts say what was expected.
  if (v.empty()) return v;
  check(H5Aread(a.get(), H5T_NATIVE_DOUBLE, v.data()),
        "reading attribute '" + name + "' of '" + absolute(obj) + "' in '" + path_ + "'", 0);
  return v;
}

std::vector<std::string> File::attr_strings(const std::string& obj, const std::string& name) const {
  Handle o = open_object(obj);
  Handle a = open_attr(*this, o.get(), obj, name);
  Handle t(check(H5Aget_type(a.get()), "attribute type"));
  if (H5Tget_class(t.get()) != H5T_STRING)
    throw Error("attribute '" + name + "' on '" + obj + "' in '" + path_ + "' is not a string");
  Handle space(check(H5Aget_space(a.get()), "attribute dataspace"));
  const auto n =
      static_cast<std::size_t>(std::max<hssize_t>(H5Sget_simple_extent_npoints(space.get()), 0));
  std::vector<std::string> out;
  if (n == 0) return out;  // an empty attribute (a null dataspace): no string
  if (H5Tis_variable_str(t.get()) > 0) {
    Handle mt = vlen_string_type(H5Tget_cset(t.get()));
    std::vector<char*> p(n, nullptr);
    {
      // HDF5 1.10 loops for ever over a damaged global heap (an object of size 0), where
      // these strings live: a read that never returns ends the job, saying so, rather than
      // hang it (a heap read takes milliseconds): after 6 x TESSERA_FAILURE_TIMEOUT, 60 s.
      const double bound = 6 * failure::deadline_s();
      const failure::Watch watch(
          "reading attribute '" + name + "' of '" + absolute(obj) + "' in '" + path_ + "'", bound,
          "HDF5 did not return from the read in " + std::to_string(static_cast<int>(bound)) +
              " s: the file's metadata is likely damaged (its global heap, where "
              "variable-length strings live; h5dump -A would hang alike)");
      check(H5Aread(a.get(), mt.get(), p.data()),
            "reading attribute '" + name + "' of '" + absolute(obj) + "' in '" + path_ + "'", 0);
    }
    for (char* s : p) out.push_back(s ? s : "");
    H5Dvlen_reclaim(mt.get(), space.get(), H5P_DEFAULT, p.data());
  } else {
    const std::size_t len = H5Tget_size(t.get());
    std::string buf(n * len, '\0');
    check(H5Aread(a.get(), t.get(), buf.data()),
          "reading attribute '" + name + "' of '" + absolute(obj) + "' in '" + path_ + "'", 0);
    for (std::size_t i = 0; i < n; ++i) {
      std::string s = buf.substr(i * len, len);
      s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace tessera::io
