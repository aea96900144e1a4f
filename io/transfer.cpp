#include "io/transfer.hpp"

#include <cstdlib>
#include <iostream>
#include <vector>

#include "decomp/error.hpp"
#include "io/h5_types.hpp"
#include "runtime/collective_error.hpp"

namespace tessera::io {
namespace {

using h5::check;
using h5::Handle;

bool env_verbose() {
  const char* v = std::getenv("TESSERA_IO_VERBOSE");
  return v && *v && std::string(v) != "0";
}

// A box of rank 0 (default constructed) or of zero volume selects nothing.
bool nothing(const Box& b) {
  return b.ndim == 0 || b.empty();
}

// Selects `b` in `space` (none when b is empty).
void select(hid_t space, const Box& b, const std::string& what) {
  if (nothing(b)) {
    check(H5Sselect_none(space), "H5Sselect_none for " + what, 0);
    return;
  }
  std::vector<hsize_t> start(static_cast<std::size_t>(b.ndim)), count(start.size());
  for (int d = 0; d < b.ndim; ++d) {
    start[static_cast<std::size_t>(d)] = static_cast<hsize_t>(b.lo[d]);
    count[static_cast<std::size_t>(d)] = static_cast<hsize_t>(b.extent(d));
  }
  check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
        "selecting " + b.str() + " of " + what, 0);
}

std::string mode_str(H5D_mpio_actual_io_mode_t m) {
  switch (m) {
    case H5D_MPIO_NO_COLLECTIVE:
      return "independent";
    case H5D_MPIO_CHUNK_INDEPENDENT:
      return "chunk independent";
    case H5D_MPIO_CHUNK_COLLECTIVE:
      return "chunk collective";
    case H5D_MPIO_CHUNK_MIXED:
      return "chunk mixed";
    case H5D_MPIO_CONTIGUOUS_COLLECTIVE:
      return "contiguous collective";
  }
  return "unknown";
}

TransferReport transfer(bool is_write, const File& f, const std::string& dset, const Box& fbox,
                        const Tensor& mem, const Box& mbox, const IoOptions& opts) {
  const std::string what = f.where(dset);
  // Local argument checks, made collective: one rank's bad box must not leave the
  // others inside H5Dread.
  std::string bad;
  if (!mem.defined() || mem.space() != MemSpace::Host || !mem.is_contiguous())
    bad = "the buffer for " + what + " must be a contiguous host tensor";
  else if (fbox.shape() != mbox.shape() && !(nothing(fbox) && nothing(mbox)))
    bad = "file box " + fbox.str() + " and buffer box " + mbox.str() + " of " + what +
          " differ in shape";
  else if (!nothing(mbox) && !Box::from_shape(mem.shape()).contains(mbox))
    bad = "buffer box " + mbox.str() + " lies outside the buffer " + shape_str(mem.shape());
  collective_check(f.comm(), bad.empty(), bad);

  Handle d = f.open_dataset(dset, mem.dtype());
  Handle fspace(check(H5Dget_space(d.get()), "dataspace of " + what));
  const int nd = H5Sget_simple_extent_ndims(fspace.get());
  std::vector<hsize_t> fdims(static_cast<std::size_t>(nd));
  H5Sget_simple_extent_dims(fspace.get(), fdims.data(), nullptr);
  const Box domain = Box::from_shape({fdims.begin(), fdims.end()});
  if (nd != mem.ndim())
    bad = what + " has rank " + std::to_string(nd) + ", the buffer " + std::to_string(mem.ndim());
  else if (!nothing(fbox) && fbox.ndim != nd)
    bad = "box " + fbox.str() + " has rank " + std::to_string(fbox.ndim) + ", " + what + " " +
          std::to_string(nd);
  else if (!nothing(fbox) && !domain.contains(fbox))
    bad = "box " + fbox.str() + " lies outside " + what + " of shape " +
          shape_str(domain.shape());
  collective_check(f.comm(), bad.empty(), bad);

  select(fspace.get(), fbox, what);
  std::vector<hsize_t> mdims(mem.shape().begin(), mem.shape().end());
  Handle mspace(check(H5Screate_simple(static_cast<int>(mdims.size()), mdims.data(), nullptr),
                      "memory dataspace"));
  select(mspace.get(), nothing(fbox) ? Box() : mbox, "the buffer");

  Handle dxpl(check(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate(transfer)"));
  check(H5Pset_dxpl_mpio(dxpl.get(), opts.collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
        "H5Pset_dxpl_mpio", 0);
  // HDF5 never dereferences the buffer for an empty selection, but wants a pointer.
  static char dummy;
  void* buf = mem.numel() > 0 ? mem.raw() : &dummy;
  const hid_t mt = h5::native_type(mem.dtype());
  herr_t rc = is_write ? H5Dwrite(d.get(), mt, mspace.get(), fspace.get(), dxpl.get(), buf)
                       : H5Dread(d.get(), mt, mspace.get(), fspace.get(), dxpl.get(), buf);
  std::string msg;
  if (rc < 0) {
    try {
      check(rc, std::string(is_write ? "writing " : "reading ") + fbox.str() + " of " + what, 0);
    } catch (const Error& e) {
      msg = e.what();
    }
  }
  collective_check(f.comm(), rc >= 0, msg);

  TransferReport rep;
  H5D_mpio_actual_io_mode_t m = H5D_MPIO_NO_COLLECTIVE;
  uint32_t local_cause = 0, global_cause = 0;
  H5Pget_mpio_actual_io_mode(dxpl.get(), &m);
  H5Pget_mpio_no_collective_cause(dxpl.get(), &local_cause, &global_cause);
  // The mode may differ between ranks (a rank with nothing to move may report
  // independent); the transfer was collective if the global cause is empty.
  rep.mode = mode_str(m);
  rep.collective = global_cause == H5D_MPIO_COLLECTIVE && opts.collective;
  rep.cause = no_collective_cause_str(global_cause);
  int rank = 0;
  MPI_Comm_rank(f.comm(), &rank);
  if ((opts.verbose || env_verbose()) && rank == 0)
    std::cerr << "tessera io: " << (is_write ? "write " : "read ") << what << ": "
              << (rep.collective ? "collective" : "NOT collective") << " (" << rep.mode
              << (rep.cause.empty() ? "" : "; " + rep.cause) << ")" << std::endl;
  return rep;
}

}  // namespace

std::string no_collective_cause_str(unsigned c) {
  if (c == H5D_MPIO_COLLECTIVE) return "";
  static const std::pair<unsigned, const char*> names[] = {
      {H5D_MPIO_SET_INDEPENDENT, "independent I/O was requested"},
      {H5D_MPIO_DATATYPE_CONVERSION, "datatype conversion"},
      {H5D_MPIO_DATA_TRANSFORMS, "data transforms"},
      {H5D_MPIO_MPI_OPT_TYPES_ENV_VAR_DISABLED, "MPI derived types disabled by environment"},
      {H5D_MPIO_NOT_SIMPLE_OR_SCALAR_DATASPACES, "dataspace not simple or scalar"},
      {H5D_MPIO_NOT_CONTIGUOUS_OR_CHUNKED_DATASET, "dataset neither contiguous nor chunked"},
      {H5D_MPIO_PARALLEL_FILTERED_WRITES_DISABLED, "parallel filtered writes disabled"},
      {H5D_MPIO_ERROR_WHILE_CHECKING_COLLECTIVE_POSSIBLE, "error while checking"}};
  std::string s;
  for (const auto& [bit, name] : names)
    if (c & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  return s.empty() ? "unknown cause " + std::to_string(c) : s;
}

TransferReport read_box(const File& f, const std::string& dset, const Box& file_box,
                        const Tensor& mem, const Box& mem_box, const IoOptions& opts) {
  return transfer(false, f, dset, file_box, mem, mem_box, opts);
}

TransferReport write_box(const File& f, const std::string& dset, const Box& file_box,
                         const Tensor& mem, const Box& mem_box, const IoOptions& opts) {
  return transfer(true, f, dset, file_box, mem, mem_box, opts);
}

}  // namespace tessera::io
