#include "io/hdf5_handle.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include "decomp/error.hpp"
#include "runtime/comm/collective_error.hpp"

namespace tessera::h5 {
namespace {
// The innermost message of HDF5's error stack: the reason, not the call chain.
herr_t take_message(unsigned, const H5E_error2_t* e, void* out) {
  auto* s = static_cast<std::string*>(out);
  if (s->empty() && e && e->desc) *s = e->desc;  // upward walks start at the innermost
  return 0;
}
std::string last_error() {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, take_message, &msg);
  H5Eclear2(H5E_DEFAULT);
  return msg.empty() ? "unknown HDF5 error" : msg;
}
}  // namespace

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::reset() noexcept {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      H5Idec_ref(id_);
      break;
  }
  id_ = H5I_INVALID_HID;
}

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw Error(what + ": " + last_error());
  return id;
}

herr_t check(herr_t rc, const std::string& what, int) {
  if (rc < 0) throw Error(what + ": " + last_error());
  return rc;
}

void silence_errors() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

namespace {
// Whether this process takes no HDF5 file locks (HDF5_USE_FILE_LOCKING=FALSE, as parallel
// file systems want and scripts/mpi-env.sh sets).
bool locking_off() {
  const char* v = std::getenv("HDF5_USE_FILE_LOCKING");
  return v && (std::strcmp(v, "FALSE") == 0 || std::strcmp(v, "0") == 0);
}

// Why an open, with this process's locking off, would read a file that a writer elsewhere
// holds (HDF5 with locking on, h5py's default, holds an exclusive flock while writing): its
// changes may be in that writer's cache, not on disk, and the values read junk. "" if none
// is seen (or the file system has no flock: then nothing can tell).
std::string held_by_writer(const std::string& path) {
  if (!locking_off()) return "";  // HDF5's own lock finds the writer
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string why;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    why =
        "another process has it open for writing (it holds the file's lock): what it wrote "
        "may not be on disk yet, so the values read could be neither the old nor the new; "
        "close the file there first (HDF5_USE_FILE_LOCKING=FALSE here takes no lock, so "
        "HDF5 would not have said)";
  ::close(fd);
  return why;
}

// HDF5's reason for refusing an open, said for what it means here: the first entry whose
// words HDF5's message holds, followed by that message.
std::string open_refused(const std::string& detail) {
  static const std::pair<const char*, const char*> kMeanings[] = {
      {"unable to lock file",
       "another process has it open for writing (it holds the file's lock): close the file "
       "there first"},
      {"already open for write",
       "it is marked open for writing: by a writer still running (a SWMR or libver='latest' "
       "writer; close the file there first), or by one that crashed (then 'h5clear -s FILE' "
       "clears the mark)"},
      {"multi driver",
       "written with HDF5's split/multi driver (metadata and raw data in separate files), "
       "which is not read here: copy it into one file"},
      {"family driver",
       "one member of a file written with HDF5's family driver (h5repart joins the members "
       "into one file)"},
  };
  for (const auto& [says, means] : kMeanings)
    if (detail.find(says) != std::string::npos) return std::string(means) + " (" + detail + ")";
  if (detail.find("truncated file") != std::string::npos)
    return "damaged or truncated HDF5 file: " + detail +
           " (or one member of a file written with the family driver: h5repart joins the "
           "members into one file)";
  return "damaged or truncated HDF5 file: " + detail;
}

// Why `path` cannot be opened for reading, or "" if it can (serial, on one rank).
std::string why_unreadable(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "no such file";
  if (std::filesystem::is_directory(path, ec)) return "is a directory";
  // A FIFO or device would block HDF5's open (and its reader) for ever.
  if (!std::filesystem::is_regular_file(path, ec)) return "not a regular file";
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  if (is_h5 < 0) return "cannot read it: " + last_error();
  if (is_h5 == 0) return "not an HDF5 file (no HDF5 signature)";
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return open_refused(last_error());
  H5Fclose(f);
  return held_by_writer(path);
}
}  // namespace

namespace {
// Whether an OMPI_MCA_io value lets Open MPI pick OMPIO: unset (its default), a list that
// names it, or an exclusion list ("^romio321") that does not.
[[maybe_unused]] bool ompio_selected(const char* io) {
  if (!io || !*io) return true;
  std::string v = io;
  const bool exclude = v[0] == '^';
  if (exclude) v.erase(0, 1);
  bool named = false;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) named = named || item == "ompio";
  return exclude ? !named : named;
}

// Open MPI 4.1's OMPIO with fcoll "vulcan" (its defaults) intermittently loses cells
// of collective writes to chunked datasets; say so once, on rank 0, unless the
// environment picks ROMIO or another fcoll component.
void warn_if_ompio_vulcan(int rank) {
#ifdef OPEN_MPI
  static bool warned = false;
  if (warned || rank != 0) return;
  warned = true;
  const char* io = std::getenv("OMPI_MCA_io");
  const char* fcoll = std::getenv("OMPI_MCA_fcoll");
  const bool ompio = ompio_selected(io);
  const bool vulcan = !fcoll || std::string(fcoll) == "vulcan";
  if (ompio && vulcan)
    std::cerr << "tessera io: warning: MPI-IO may run through OMPIO with fcoll=vulcan, whose "
                 "collective writes have lost data in Tessera's tests; set OMPI_MCA_io=romio321 "
                 "(scripts/mpi-env.sh does)"
              << std::endl;
#else
  (void)rank;
#endif
}
}  // namespace

MPI_Info mpiio_hints() {
  MPI_Info info;
  MPI_Info_create(&info);
  // Each rank reads large boxes of its own: ROMIO's collective buffering would funnel
  // them through one aggregator per node whenever halos make requests overlap (10x
  // slower for 1-cell halos in the io benchmark). Writes keep it.
  MPI_Info_set(info, "romio_cb_read", "disable");
  if (const char* env = std::getenv("TESSERA_MPIIO_HINTS")) {
    std::string all = env, item;
    for (std::size_t i = 0; i <= all.size(); ++i) {
      if (i == all.size() || all[i] == ',') {
        const auto eq = item.find('=');
        if (eq != std::string::npos && eq > 0)
          MPI_Info_set(info, item.substr(0, eq).c_str(), item.substr(eq + 1).c_str());
        item.clear();
      } else {
        item += all[i];
      }
    }
  }
  return info;
}

hid_t dataset_access() {
  static const hid_t dapl = [] {
    const hid_t p = check(H5Pcreate(H5P_DATASET_ACCESS), "H5Pcreate(dataset access)");
    check(H5Pset_efile_prefix(p, "${ORIGIN}"), "H5Pset_efile_prefix", 0);
    check(H5Pset_virtual_prefix(p, "${ORIGIN}"), "H5Pset_virtual_prefix", 0);
    return p;
  }();
  return dapl;
}

Handle open_parallel(const std::string& path, MPI_Comm comm, Mode mode) {
  silence_errors();
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  warn_if_ompio_vulcan(rank);
  const bool create = mode == Mode::Create || mode == Mode::CreateNew;
  if (!create) {
    std::string why = rank == 0 ? why_unreadable(path) : std::string();
    // To be written in place (statistics as attributes): said so, not as MPI-IO's
    // "MPI_ERR_ACCESS: invalid access mode".
    if (rank == 0 && why.empty() && mode == Mode::ReadWrite && ::access(path.c_str(), W_OK) != 0)
      why = std::string("it is to be written in place, and cannot be: ") + std::strerror(errno);
    why = broadcast_string(comm, why);
    if (!why.empty()) throw Error("cannot open HDF5 file '" + path + "': " + why);
  }
  Handle fapl(check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate(file access)"));
  MPI_Info info = mpiio_hints();
  const herr_t set = H5Pset_fapl_mpio(fapl.get(), comm, info);
  MPI_Info_free(&info);
  check(set, "H5Pset_fapl_mpio", 0);
  check(H5Pset_all_coll_metadata_ops(fapl.get(), true), "H5Pset_all_coll_metadata_ops", 0);
  check(H5Pset_coll_metadata_write(fapl.get(), true), "H5Pset_coll_metadata_write", 0);
  hid_t f = H5I_INVALID_HID;
  if (create)
    f = H5Fcreate(path.c_str(), mode == Mode::Create ? H5F_ACC_TRUNC : H5F_ACC_EXCL, H5P_DEFAULT,
                  fapl.get());
  else
    f = H5Fopen(path.c_str(), mode == Mode::Read ? H5F_ACC_RDONLY : H5F_ACC_RDWR, fapl.get());
  std::string msg;
  if (f < 0)
    msg = std::string(create ? "cannot create" : "cannot open") + " HDF5 file '" + path +
          "': " + last_error();
  Handle h(f < 0 ? H5I_INVALID_HID : f);
  collective_check(comm, f >= 0, msg);
  return h;
}

}  // namespace tessera::h5
