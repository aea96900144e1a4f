#include "io/transfer.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "decomp/error.hpp"
#include "io/h5_types.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/fault_inject.hpp"

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

// Offset (in elements) of `w` inside a row-major buffer of `shape` when the window is
// one contiguous run (full in every dim after the first of extent > 1), else -1.
Index contiguous_window_offset(const std::vector<Index>& shape, const Box& w) {
  int first = 0;
  while (first < w.ndim && w.extent(first) == 1) ++first;
  for (int d = first + 1; d < w.ndim; ++d)
    if (w.lo[d] != 0 || w.hi[d] != shape[static_cast<std::size_t>(d)]) return -1;
  return linear_index(Box::from_shape(shape), w.lo);
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

enum class Chunks { Whole, PartlyWritten, PartlyWrittenFiltered };

// Whether a chunked dataset holds fewer allocated chunks than it has (h5py allocates chunks
// as they are written), and how many of how many. HDF5 may call a fully written dataset
// "partly allocated"; the chunk count tells. Local: metadata only, the same on every rank.
struct ChunkCount {
  Chunks state = Chunks::Whole;
  hsize_t written = 0, total = 0;
};
ChunkCount chunk_count(hid_t d) {
  H5D_space_status_t st = H5D_SPACE_STATUS_ERROR;
  if (H5Dget_space_status(d, &st) < 0 || st != H5D_SPACE_STATUS_PART_ALLOCATED) return {};
  Handle dcpl(H5Dget_create_plist(d));
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return {};
  Handle space(H5Dget_space(d));
  const int nd = H5Sget_simple_extent_ndims(space.get());
  if (nd <= 0) return {};
  std::vector<hsize_t> dims(static_cast<std::size_t>(nd)), chunk(static_cast<std::size_t>(nd));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  H5Pget_chunk(dcpl.get(), nd, chunk.data());
  hsize_t chunks = 1, written = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) chunks *= (dims[i] + chunk[i] - 1) / chunk[i];
  if (H5Dget_num_chunks(d, space.get(), &written) < 0 || written >= chunks) return {};
  return {H5Pget_nfilters(dcpl.get()) != 0 ? Chunks::PartlyWrittenFiltered : Chunks::PartlyWritten,
          written, chunks};
}
Chunks chunk_state(hid_t d) {
  return chunk_count(d).state;
}

std::string partly_written_filtered_text(const std::string& what) {
  return what +
         " is filtered (compressed or checksummed) and only partly written (some chunks "
         "were never written, as h5py leaves them): parallel HDF5 cannot read it; "
         "write it whole, or rewrite it (h5repack) without filters";
}

// An unfiltered dataset so written is read independently (a collective read fails); a
// filtered one parallel HDF5 cannot read at all ("addr overflow"): refused, saying why.
bool partly_written_chunks(hid_t d, const std::string& what) {
  const Chunks c = chunk_state(d);
  if (c == Chunks::PartlyWrittenFiltered) throw Error(partly_written_filtered_text(what));
  return c == Chunks::PartlyWritten;
}

// A dataset transfer property list, collective or independent.
Handle transfer_plist(bool collective) {
  Handle dxpl(check(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate(transfer)"));
  check(H5Pset_dxpl_mpio(dxpl.get(), collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
        "H5Pset_dxpl_mpio", 0);
  return dxpl;
}

// One H5Dwrite or H5Dread of the selections, its failure made collective (named with
// `what`). An injected write failure skips the call on this rank, as a real ENOSPC leaves
// it: the others wait inside HDF5 while this one reports.
void h5_transfer(bool is_write, const File& f, hid_t d, hid_t mt, hid_t mspace, hid_t fspace,
                 hid_t dxpl, void* buf, const std::string& what) {
  const bool injected = is_write && fault_point("h5write");
  const herr_t rc = injected   ? herr_t(-1)
                    : is_write ? H5Dwrite(d, mt, mspace, fspace, dxpl, buf)
                               : H5Dread(d, mt, mspace, fspace, dxpl, buf);
  std::string msg;
  if (injected) {
    msg = "writing " + what + ": No space left on device (injected by TESSERA_FAULT_INJECT)";
  } else if (rc < 0) {
    try {
      check(rc, std::string(is_write ? "writing " : "reading ") + what, 0);
    } catch (const Error& e) {
      msg = e.what();
    }
  }
  collective_check(f.comm(), rc >= 0, msg);
}

TransferReport transfer_scalar(bool is_write, const File& f, hid_t d, hid_t fspace,
                               const Tensor& mem, const std::string& what, const IoOptions& opts) {
  int rank = 0;
  MPI_Comm_rank(f.comm(), &rank);
  const bool moves = !is_write || rank == 0;
  Handle mspace(check(H5Screate(H5S_SCALAR), "memory dataspace"));
  if (moves) {
    check(H5Sselect_all(fspace), "H5Sselect_all for " + what, 0);
    check(H5Sselect_all(mspace.get()), "H5Sselect_all for the buffer", 0);
  } else {
    check(H5Sselect_none(fspace), "H5Sselect_none for " + what, 0);
    check(H5Sselect_none(mspace.get()), "H5Sselect_none for the buffer", 0);
  }
  const Handle dxpl = transfer_plist(opts.collective);
  h5_transfer(is_write, f, d, h5::native_type(mem.dtype()), mspace.get(), fspace, dxpl.get(),
              mem.raw(), what);
  uint32_t local_cause = 0, global_cause = 0;
  H5Pget_mpio_no_collective_cause(dxpl.get(), &local_cause, &global_cause);
  TransferReport rep;
  rep.collective = opts.collective && global_cause == H5D_MPIO_COLLECTIVE;
  rep.cause = no_collective_cause_str(global_cause);
  rep.mode = "scalar";
  rep.calls = 1;
  return rep;
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
  // A filter this HDF5 lacks: said with its name and id, not as the plugin directory that
  // H5Dread failed to search (the same answer on every rank: the pipeline is metadata).
  if (!is_write) {
    const std::string missing = unavailable_filter(f, dset);
    if (!missing.empty()) throw Error(missing);
  }
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
    bad = "box " + fbox.str() + " lies outside " + what + " of shape " + shape_str(domain.shape());
  else if (nd == 0 && H5Sget_simple_extent_type(fspace.get()) != H5S_SCALAR)
    bad = what + " has a null dataspace: it holds no value";
  collective_check(f.comm(), bad.empty(), bad);
  // A dataset of no elements: nothing to move (HDF5 gives it no storage address, and a
  // transfer, even selecting nothing, fails with "addr overflow"). Metadata: the same
  // answer on every rank.
  if (nd > 0 && domain.empty()) {
    TransferReport none;
    none.collective = opts.collective;
    none.mode = "no data";
    none.calls = 0;
    return none;
  }
  // A 0-d (scalar) dataset: its one value, which every rank reads and rank 0 writes (a 0-d
  // box is also how "no part" is spelled, so the pieces below would move nothing).
  if (nd == 0) return transfer_scalar(is_write, f, d.get(), fspace.get(), mem, what, opts);

  // The plan: pieces of (file box, contiguous buffer, window in it), each one collective
  // transfer. Every rank makes as many calls as the rank with the most pieces.
  struct Piece {
    Box fbox;
    Tensor buf;     // contiguous
    Box mbox;       // in buf's index space
    Tensor window;  // staged pieces: the part of `mem` that buf stands for
  };
  std::vector<Piece> pieces;
  const MemoryPath path = opts.memory;
  if (!nothing(fbox)) {
    if (path == MemoryPath::Direct || Box::from_shape(mem.shape()) == mbox) {
      pieces.push_back({fbox, mem, mbox, Tensor()});
    } else if (const Index off = contiguous_window_offset(mem.shape(), mbox); off >= 0) {
      // A contiguous run of the buffer: read straight into it, described as a whole.
      Tensor run = mem.view(mbox);  // contiguous by construction
      pieces.push_back({fbox, run, Box::from_shape(mbox.shape()), Tensor()});
    } else {
      // Staged: contiguous pieces along the outermost dim of extent > 1, copied between
      // the staging buffer and the window. Avoids MPI-IO's slow paths for strided
      // memory types (ROMIO took 60x longer for a padded window than for a whole buffer).
      int s = 0;
      while (s + 1 < mbox.ndim && mbox.extent(s) == 1) ++s;
      Index unit = static_cast<Index>(mem.elem_size());
      for (int dd = s + 1; dd < mbox.ndim; ++dd) unit *= mbox.extent(dd);
      const Index rows = std::max<Index>(1, static_cast<Index>(opts.staging_bytes) / unit);
      for (Index r0 = 0; r0 < mbox.extent(s); r0 += rows) {
        const Index r1 = std::min(mbox.extent(s), r0 + rows);
        Box fb = fbox, mb = mbox;
        fb.lo[s] = fbox.lo[s] + r0, fb.hi[s] = fbox.lo[s] + r1;
        mb.lo[s] = mbox.lo[s] + r0, mb.hi[s] = mbox.lo[s] + r1;
        Tensor stage = Tensor::empty(mb.shape(), mem.dtype());
        pieces.push_back({fb, stage, Box::from_shape(mb.shape()), mem.view(mb)});
      }
    }
  }
  int mine = static_cast<int>(pieces.size()), calls = 0;
  MPI_Allreduce(&mine, &calls, 1, MPI_INT, MPI_MAX, f.comm());

  // A chunked dataset only partly written (h5py writes chunks as they are touched) fails a
  // collective read in MPI-IO (MPI_File_set_view: invalid datatype, HDF5 1.14); an
  // independent one reads it, the unwritten chunks as fill values. The status is metadata:
  // the same on every rank.
  const bool collective = opts.collective && (is_write || !partly_written_chunks(d.get(), what));
  const Handle dxpl = transfer_plist(collective);
  const hid_t mt = h5::native_type(mem.dtype());
  TransferReport rep;
  rep.collective = collective;
  uint32_t causes = 0;
  for (int c = 0; c < std::max(calls, 1); ++c) {
    const Piece none{Box(), mem, Box(), Tensor()};
    const Piece& pc = c < mine ? pieces[static_cast<std::size_t>(c)] : none;
    if (is_write && pc.window.defined()) pc.buf.copy_from(pc.window);
    select(fspace.get(), pc.fbox, what);
    std::vector<hsize_t> mdims(pc.buf.shape().begin(), pc.buf.shape().end());
    Handle mspace(check(H5Screate_simple(static_cast<int>(mdims.size()), mdims.data(), nullptr),
                        "memory dataspace"));
    select(mspace.get(), nothing(pc.fbox) ? Box() : pc.mbox, "the buffer");
    // HDF5 never dereferences the buffer for an empty selection, but wants a pointer.
    static char dummy;
    void* buf = pc.buf.numel() > 0 ? pc.buf.raw() : &dummy;
    // This rank's part, where it has one (a rank with nothing to move still takes part).
    const std::string part = nothing(pc.fbox) ? "" : pc.fbox.str() + " of ";
    h5_transfer(is_write, f, d.get(), mt, mspace.get(), fspace.get(), dxpl.get(), buf, part + what);
    if (!is_write && pc.window.defined()) pc.window.copy_from(pc.buf);
    H5D_mpio_actual_io_mode_t m = H5D_MPIO_NO_COLLECTIVE;
    uint32_t local_cause = 0, global_cause = 0;
    H5Pget_mpio_actual_io_mode(dxpl.get(), &m);
    H5Pget_mpio_no_collective_cause(dxpl.get(), &local_cause, &global_cause);
    // The mode may differ between ranks (a rank with nothing to move may report
    // independent); the transfer was collective if the global cause is empty.
    if (c == 0 || m != H5D_MPIO_NO_COLLECTIVE) rep.mode = mode_str(m);
    causes |= global_cause;
  }
  rep.collective = rep.collective && causes == H5D_MPIO_COLLECTIVE;
  rep.cause = no_collective_cause_str(causes);
  rep.calls = std::max(calls, 1);
  int rank = 0;
  MPI_Comm_rank(f.comm(), &rank);
  if ((opts.verbose || env_verbose()) && rank == 0)
    std::cerr << "tessera io: " << (is_write ? "write " : "read ") << what << ": "
              << (rep.collective ? "collective" : "NOT collective") << " (" << rep.mode
              << (rep.cause.empty() ? "" : "; " + rep.cause) << ", " << rep.calls
              << (rep.calls == 1 ? " call" : " calls") << ")" << std::endl;
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

namespace {
// `dset` of f, opened for a look at its metadata ("u" and "/u" alike).
Handle open_dataset(const File& f, const std::string& dset) {
  const std::string name = dset.empty() || dset[0] != '/' ? "/" + dset : dset;
  return Handle(
      check(H5Dopen2(f.id(), name.c_str(), h5::dataset_access()), "opening " + f.where(dset)));
}
}  // namespace

std::string unavailable_filter(const File& f, const std::string& dset) {
  const Handle d = open_dataset(f, dset);
  Handle dcpl(check(H5Dget_create_plist(d.get()), "creation properties of " + f.where(dset)));
  const int nf = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < nf; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t nelem = 0;
    char fname[128] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelem,
                                           nullptr, sizeof fname, fname, &config);
    if (id < 0) return f.where(dset) + ": its filter " + std::to_string(i) + " cannot be read";
    // Also true for a plugin HDF5 can load (HDF5_PLUGIN_PATH); false leaves an error stack
    // (the plugin directory searched), which is not the cause to report.
    const htri_t avail = H5Zfilter_avail(id);
    H5Eclear2(H5E_DEFAULT);
    if (avail <= 0 ||
        (H5Zget_filter_info(id, &config) >= 0 && !(config & H5Z_FILTER_CONFIG_DECODE_ENABLED)))
      return f.where(dset) + " is stored with filter '" + (fname[0] ? fname : "unnamed") +
             "' (id " + std::to_string(id) +
             "), which this HDF5 does not have (not built in, and no plugin for it on "
             "HDF5_PLUGIN_PATH): its values cannot be read here (rewrite it without that "
             "filter, e.g. h5repack -f NONE, or make the plugin available)";
  }
  return "";
}

std::string storage_problem(const File& f, const std::string& dset) {
  const Handle d = open_dataset(f, dset);
  {
    const Handle dcpl(H5Dget_create_plist(d.get()));
    if (dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_VIRTUAL)
      return f.where(dset) +
             " is a virtual dataset, which parallel HDF5 cannot read: copy it into a plain "
             "one (h5repack)";
  }
  H5D_space_status_t st = H5D_SPACE_STATUS_ERROR;
  check(H5Dget_space_status(d.get(), &st), "allocation status of " + f.where(dset), 0);
  if (st == H5D_SPACE_STATUS_NOT_ALLOCATED)
    return f.where(dset) +
           " holds no written data (its storage was never allocated: created, never written)";
  const ChunkCount c = chunk_count(d.get());
  if (c.state == Chunks::PartlyWrittenFiltered) return partly_written_filtered_text(f.where(dset));
  if (c.state == Chunks::PartlyWritten)
    return f.where(dset) + " is only partly written: " + std::to_string(c.written) + " of its " +
           std::to_string(c.total) +
           " chunks were ever written (h5py allocates chunks as they are written); the rest "
           "would read as the fill value, not data: write it whole";
  return "";
}

bool storage_allocated(const File& f, const std::string& dset) {
  const Handle d = open_dataset(f, dset);
  H5D_space_status_t st = H5D_SPACE_STATUS_ERROR;
  check(H5Dget_space_status(d.get(), &st), "allocation status of " + f.where(dset), 0);
  return st != H5D_SPACE_STATUS_NOT_ALLOCATED;
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
