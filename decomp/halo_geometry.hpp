#pragma once
// Halo geometry: which boxes each block of a BlockPartition sends and receives so that
// its ghost cells (its padded box minus the block) hold their owners' values.
//
// Everything is box intersection against periodic images of the blocks, never neighbour
// offsets, so faces, edges and corners come in one round, periodic dims wrap any number of
// times, and a ghost layer wider than a thin or empty neighbour reaches the blocks beyond.
// Pure geometry: no communication happens here; the runtime turns plans into messages.
#include <memory>
#include <mutex>
#include <vector>

#include "decomp/partition.hpp"

namespace tessera {

// Ghost widths: per dim a left and a right width, either one set for all blocks
// (uniform) or one set per block id. Widths may differ per side and may be zero.
class HaloWidths {
 public:
  HaloWidths() = default;
  // The same widths for every block.
  HaloWidths(std::vector<Index> left, std::vector<Index> right);
  // left[b], right[b]: the widths of block b.
  static HaloWidths per_block(std::vector<std::vector<Index>> left,
                              std::vector<std::vector<Index>> right);

  bool uniform() const { return left_.size() == 1 && right_.size() == 1; }
  bool empty() const { return left_.empty(); }  // default-constructed: no widths at all
  const std::vector<Index>& left(int block) const;
  const std::vector<Index>& right(int block) const;
  // Throws tessera::Error unless the widths fit a partition of that rank and block count.
  void validate(int ndim, int num_blocks) const;

  bool operator==(const HaloWidths& o) const { return left_ == o.left_ && right_ == o.right_; }

 private:
  std::vector<std::vector<Index>> left_, right_;  // one entry (uniform) or one per block
};

// One region block r sends: its cells `src` land at src + shift in peer's padded frame.
struct HaloSend {
  int peer = 0;              // receiving block
  Box src;                   // global coords, inside the sending block
  std::vector<Index> shift;  // dst = src + shift; multiples of the domain extent, 0 in open dims
};

// One region block r receives: cells dst - shift of peer land at dst.
struct HaloRecv {
  int peer = 0;              // sending block
  Box dst;                   // global coords in r's padded frame (outside the domain if wrapped)
  std::vector<Index> shift;  // src = dst - shift
};

// Everything one block does in a halo exchange. Both lists are sorted by (peer, lo corner of
// the receiver-frame box, shift), so the sends on p to q and the receives on q from p pair up
// one to one, in order, even when two blocks (or a block and itself) exchange several regions.
struct HaloPlan {
  std::vector<HaloSend> sends;
  std::vector<HaloRecv> recvs;
  std::vector<Box> open;  // disjoint ghost boxes with no source (open boundaries)
  Index cells_sent = 0;
  Index cells_received = 0;
  Index open_cells = 0;  // cells_received + open_cells == ghost cells of the padded box
};

class HaloGeometry {
 public:
  // periodic[d]: dim d wraps modulo the domain extent. Throws tessera::Error on widths or
  // flags that do not fit the partition.
  HaloGeometry(const BlockPartition& part, const HaloWidths& widths,
               const std::vector<bool>& periodic);
  HaloGeometry(const HaloGeometry&) = delete;  // owns a mutex and plans handed out by reference
  HaloGeometry& operator=(const HaloGeometry&) = delete;

  const BlockPartition& partition() const { return part_; }
  const HaloWidths& widths() const { return widths_; }
  const std::vector<bool>& periodic() const { return periodic_; }

  // The block grown by its ghost widths, in global coords.
  Box padded_box(int block) const;
  // The plan of one block, computed on first use and cached; thread-safe, and the reference
  // stays valid for the lifetime of this object.
  const HaloPlan& plan(int block) const;

 private:
  void check_block(int block, const char* what) const;
  std::vector<HaloRecv> compute_recvs(int r) const;
  std::vector<HaloSend> compute_sends(int r) const;
  std::vector<Box> compute_open(int r) const;

  BlockPartition part_;
  HaloWidths widths_;
  std::vector<bool> periodic_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<HaloPlan>> plans_;  // one slot per block, filled lazily
};

// Process-wide cache keyed by (partition, widths, periodicity), as AMReX caches its
// FillBoundary metadata: repeated exchanges on one layout compute their plans once.
// Thread-safe and bounded: the least recently asked-for geometry beyond
// kHaloGeometryCacheEntries leaves the cache (a holder of its pointer keeps it alive), so
// a run over many layouts (inference at many sizes) does not grow without end.
inline constexpr std::size_t kHaloGeometryCacheEntries = 64;
std::shared_ptr<const HaloGeometry> cached_halo_geometry(const BlockPartition& part,
                                                         const HaloWidths& widths,
                                                         const std::vector<bool>& periodic);

}  // namespace tessera
