#pragma once
// Collective hyperslab transfers: every rank of the file's communicator moves its own
// box of a dataset to or from a window of its own host buffer in one collective
// H5Dread / H5Dwrite; a rank with an empty box takes part with an empty selection.
// After each transfer HDF5 is asked whether it stayed collective.
#include "io/floor.hpp"
#include <string>
#include <vector>

#include "io/file.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::io {

// How a window of a larger buffer (a halo-padded shard) meets MPI-IO.
enum class MemoryPath {
  Auto,    // whole buffers and contiguous windows directly; strided windows staged
  Direct,  // always one transfer with a strided memory selection (MPI derived types)
  Staged,  // strided windows through contiguous staging buffers, then copied
};

struct IoOptions {
  bool collective = true;  // false: independent MPI-IO (for comparison)
  MemoryPath memory = MemoryPath::Auto;
  std::size_t staging_bytes = std::size_t(256) << 20;  // per staged piece
  // Rank 0 prints, for each transfer, whether it stayed collective and, if not, why
  // (H5Pget_mpio_no_collective_cause). Also on with env TESSERA_IO_VERBOSE=1.
  bool verbose = false;
  // read_halo / read_halo_into: per dataset dim, whether ghosts wrap around the domain
  // (a periodic dim, as HaloOptions::periodic); empty: none. Ghosts past an open edge
  // keep their values.
  std::vector<bool> periodic;
};

struct TransferReport {
  bool collective = false;  // the transfer ran collectively on every rank
  std::string mode;         // "contiguous collective", "chunk collective", "independent", ...
  std::string cause;        // why not collective (all ranks' causes), "" when it was
  int calls = 1;            // collective H5Dread/H5Dwrite calls it took (staged pieces)
};

// Collective over the file's communicator. `mem` is a contiguous host tensor of the
// dataset's dtype and rank; `mem_box` (in mem's index space) has the shape of
// `file_box` (in the dataset's). Either box may be empty on any rank. Every rank makes
// the same number of collective calls (one, or as many as the most staged pieces).
TransferReport read_box(const File& f, const std::string& dset, const Box& file_box,
                        const Tensor& mem, const Box& mem_box, const IoOptions& opts = {});
TransferReport write_box(const File& f, const std::string& dset, const Box& file_box,
                         const Tensor& mem, const Box& mem_box, const IoOptions& opts = {});

// Why `dset` cannot be read here, else "": a filter of its pipeline (a compression such as
// h5py's lzf) that this HDF5 lacks, named with its id ("dataset '/fields/u' in 'F.h5' is
// stored with filter 'lzf' (id 32000), which this HDF5 does not have ..."). Local, no I/O.
std::string unavailable_filter(const File& f, const std::string& dset);
// Why the storage of `dset` holds no complete data, else "": never written (unallocated),
// or only partly written, as h5py leaves a chunked dataset it wrote in part (the unwritten
// chunks would read as the fill value; filtered, parallel HDF5 cannot read it at all).
// Local, metadata only: the same answer on every rank.
std::string storage_problem(const File& f, const std::string& dset);
// Whether any storage of `dset` was ever allocated (H5Dget_space_status): false for a
// dataset created and never written (reads would return fill values, not data).
bool storage_allocated(const File& f, const std::string& dset);

// The "why not collective" bits of H5Pget_mpio_no_collective_cause, in words.
std::string no_collective_cause_str(unsigned cause);

}  // namespace tessera::io
