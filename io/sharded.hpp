#pragma once
// Sharded dataset I/O: each rank reads or writes only its own part of a dataset, in one
// collective transfer. A halo read fills the ghost cells too (those inside the domain;
// ghosts outside it are zero), so no exchange is needed after loading.
#include "io/floor.hpp"
#include <string>
#include <vector>

#include "io/transfer.hpp"
#include "runtime/tensor/halo_tensor.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera::io {

// The dataset's shape must equal spec's global shape and its type `dtype`; otherwise
// every rank throws naming the file and the dataset.
ShardTensor read_sharded(const File& f, const std::string& dset, const Mesh& mesh,
                         const ShardSpec& spec, DType dtype = DType::f32,
                         const IoOptions& opts = {}, TransferReport* report = nullptr);
// The padded box of each rank, clipped to the dataset, in one collective read; with
// opts.periodic, ghosts across a periodic edge are read from the other side of the
// domain (one collective read per combination of wraps), as the halo exchange fills them.
HaloTensor read_halo(const File& f, const std::string& dset, const Mesh& mesh,
                     const ShardSpec& spec, const std::vector<Index>& left,
                     const std::vector<Index>& right, DType dtype = DType::f32,
                     const IoOptions& opts = {}, TransferReport* report = nullptr);

// Into an existing HaloTensor (reused across steps): its padded box clipped to the
// dataset (and wrapped along periodic dims); ghosts past an open edge keep their values
// (zero in a new HaloTensor).
TransferReport read_halo_into(const File& f, const std::string& dset, const HaloTensor& h,
                              const IoOptions& opts = {});

struct WriteOptions {
  // Chunk shape of a new dataset. Empty: one chunk per shard (the largest shard shape,
  // halved along its outer dims while over max_chunk_bytes); {0}: contiguous layout.
  std::vector<Index> chunk;
  std::size_t max_chunk_bytes = std::size_t(1) << 30;  // HDF5 caps chunks at 4 GiB
  IoOptions io;
};

// The chunk shape WriteOptions' default gives for `spec`.
std::vector<Index> decomposition_chunk(const ShardSpec& spec, std::size_t elem_size,
                                       std::size_t max_chunk_bytes);

// Collective: creates `dset` (replacing nothing: it must not exist) shaped as t's global
// tensor and writes every shard into it. Replicated copies are written once.
TransferReport write_sharded(File& f, const std::string& dset, const ShardTensor& t,
                             const WriteOptions& opts = {});

// A box of a dataset into a new tensor of that box's shape, on each rank its own box
// (empty boxes allowed): point clouds by ranges, single samples, slabs.
Tensor read_slab(const File& f, const std::string& dset, const Box& box, DType dtype,
                 const IoOptions& opts = {}, TransferReport* report = nullptr);
// Points [begin, end) of sample n of a point-cloud dataset (N, P, C): a (end-begin, C)
// tensor.
Tensor read_points(const File& f, const std::string& dset, Index sample, Index begin, Index end,
                   DType dtype = DType::f32, const IoOptions& opts = {});
// This rank's balanced share [begin, end) of `count` items over `nranks` ranks.
std::pair<Index, Index> balanced_range(Index count, int nranks, int rank);

}  // namespace tessera::io
