#pragma once
// RAII over HDF5 C API identifiers, and parallel file access (MPI-IO driver with
// collective metadata). Every failing HDF5 call becomes a tessera::Error naming the
// call and the file.
#include "io/floor.hpp"
#include <hdf5.h>
#include <mpi.h>

#include <string>

namespace tessera::h5 {

// Owns one hid_t and closes it with the matching H5*close.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Throws tessera::Error("<what>: <HDF5's error stack>") when id < 0; returns id.
hid_t check(hid_t id, const std::string& what);
herr_t check(herr_t rc, const std::string& what, int);

// Turns HDF5's automatic error-stack printing off (once per process): failures become
// tessera::Error messages instead of pages of stderr on every rank.
void silence_errors();

// The MPI-IO hints files are opened with (the caller frees them): romio_cb_read=disable
// (each rank reads large boxes of its own), then any key=value,key=value pairs of env
// TESSERA_MPIIO_HINTS (e.g. romio_cb_read=automatic on a parallel file system where
// collective buffering pays).
MPI_Info mpiio_hints();

// Create truncates a file there; CreateNew fails if anything is there (a file, or a link,
// which it does not follow).
enum class Mode { Read, ReadWrite, Create, CreateNew };
// Collective over comm: all ranks open the same file with the MPI-IO driver. For Read
// and ReadWrite, rank 0 first checks that the file exists, is HDF5 and opens serially
// (a truncated file fails there), and every rank throws the same error if not, so a
// bad file never leaves ranks waiting inside a collective open.
Handle open_parallel(const std::string& path, MPI_Comm comm, Mode mode);

// The dataset access properties every dataset is opened with: relative paths of external
// raw files and of virtual datasets' sources are taken from the HDF5 file's folder
// ("${ORIGIN}"), not from the working directory. Kept for the process.
hid_t dataset_access();

}  // namespace tessera::h5
