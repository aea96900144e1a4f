#pragma once
// io::File: one HDF5 file opened by every rank of a communicator (MPI-IO driver,
// collective metadata), with datasets checked on open and attributes read and written.
// Every failure is a tessera::Error naming the file and the dataset, thrown on every
// rank of the communicator (checks run on data all ranks see alike, and the parallel
// open is guarded by a serial pre-check on rank 0).
#include "io/floor.hpp"
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decomp/box.hpp"
#include "io/hdf5_handle.hpp"
#include "decomp/dtype.hpp"

namespace tessera::io {

using h5::Mode;

struct DatasetInfo {
  std::string name;
  std::vector<Index> shape;
  std::optional<DType> dtype;        // nullopt: a type Tessera does not read
  std::string type_name;             // "float32", "int32", ...
  std::vector<Index> chunk;          // empty: contiguous layout
  std::vector<std::string> filters;  // "deflate", "shuffle", ...
};

// `chunk` of `elem_size`-byte elements made smaller than HDF5's 4 GiB limit on a chunk:
// its largest extent halved (rounded up) until it fits; unchanged when it does already.
std::vector<Index> chunk_within_hdf5_limit(std::vector<Index> chunk, std::size_t elem_size);

class File {
 public:
  File() = default;
  // Closing is collective. A rank that leaves a scope with an exception while the file is
  // open may be alone in that close, so it closes under a failure::Watch (bounded wait).
  ~File();
  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;
  // Collective over comm.
  static File open(const std::string& path, MPI_Comm comm, Mode mode = Mode::Read);
  static File create(const std::string& path, MPI_Comm comm);  // truncates

  bool valid() const { return h_.valid(); }
  const std::string& path() const { return path_; }
  MPI_Comm comm() const { return comm_; }
  hid_t id() const { return h_.get(); }
  void close() { h_.reset(); }  // collective
  // Collective, for a file opened to read: throws if it changed since it was opened (its
  // size or modification time: another program writing or truncating it in place), so
  // values read from it may mix old and new (a truncated file reads as zeros past its
  // end). Its readers call it once they have read what they keep. A rewrite of the same
  // size that sets the modification time back goes unseen: the change time would see it,
  // but also moves on a rename, a chmod or an mv over the path, which leave the values read
  // alone, so it is not compared.
  void check_unchanged() const;
  // "dataset '/fields/u' in 'F.h5'": the where of every message.
  std::string where(const std::string& dset) const;

  // An object (group or dataset) at this absolute path exists.
  bool exists(const std::string& path) const;
  // The other file `path` leads into through links ("the file 'other.h5' (through the
  // external link '/fields/u')"), or "" when its object lies in this file. Collective (it
  // opens the object, and so the other file, as HDF5's metadata reads are).
  std::string external_link_on(const std::string& path) const;
  // Every dataset under `group`, recursively, as absolute paths in name order.
  std::vector<std::string> datasets(const std::string& group = "/") const;
  DatasetInfo info(const std::string& dset) const;
  // Opens a dataset and checks what the caller expects of it: its element type, and
  // its shape (rank first, then extents; -1 in `shape` accepts any extent).
  h5::Handle open_dataset(const std::string& dset, std::optional<DType> dtype = {},
                          const std::vector<Index>& shape = {}) const;
  // Collective: a new dataset (parent groups created as needed), no fill values
  // written. chunk empty: contiguous layout; a chunk of 4 GiB or more (HDF5's limit: one
  // rank's share of a sample) is halved along its largest dims until it fits
  // (io::chunk_within_hdf5_limit).
  void create_dataset(const std::string& dset, const std::vector<Index>& shape, DType dtype,
                      const std::vector<Index>& chunk = {});

  // Attributes of the object at `obj` ("/" is the file's root group). Writes are
  // collective and every rank must pass the same values; an existing one is replaced.
  void set_attr(const std::string& obj, const std::string& name, const std::vector<double>& v);
  void set_attr(const std::string& obj, const std::string& name, std::int64_t v);
  void set_attr(const std::string& obj, const std::string& name, const std::string& v);
  void set_attr(const std::string& obj, const std::string& name, const std::vector<std::string>& v);
  bool has_attr(const std::string& obj, const std::string& name) const;
  std::vector<std::string> attr_names(const std::string& obj) const;
  // Numeric attributes converted to double; strings as strings. Throw if missing.
  std::vector<double> attr_doubles(const std::string& obj, const std::string& name) const;
  std::vector<std::string> attr_strings(const std::string& obj, const std::string& name) const;
  // Whether the attribute holds strings (else numbers).
  bool attr_is_string(const std::string& obj, const std::string& name) const;

 private:
  h5::Handle open_object(const std::string& obj) const;
  h5::Handle h_;
  std::string path_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  // Rank 0, read mode: a descriptor of the file as opened and its size and modification
  // time then (fstat through it follows that file even where the name is replaced).
  struct Opened;
  std::shared_ptr<const Opened> opened_;
  // Bytes of the datasets this handle created: allocated in the file at creation but on
  // disk only once written, so the free-space check counts those not yet written.
  double created_bytes_ = 0;
};

}  // namespace tessera::io
