#pragma once
// Bounded reads of one rank's share of a sample: the scans of values (schema::validate's
// search for a non-finite value, schema::scan's statistics behind tessera-prep inspect and
// stats) read a sample of any size in pieces of at most piece_bytes() per rank, so a
// sample larger than a node's memory is streamed, never held whole.
#include "io/floor.hpp"
#include <vector>

#include "decomp/box.hpp"

namespace tessera::io {

// The most bytes of values one rank reads at a time in a streaming scan: 64 MiB.
inline constexpr Index kPieceBytes = Index(64) << 20;
// kPieceBytes, or TESSERA_IO_PIECE_BYTES from the environment when set (a whole number
// >= 1; for tests that force a small sample into many pieces). The one place it is read;
// read on every call (tests set it in-process). A value that is no such number throws.
Index piece_bytes();

// One rank's share of each sample of a dataset of `shape` (N first): dim `split` (>= 1)
// limited to [begin, end), every other dim after N whole; cut into pieces of at most
// `budget` elements (at least one element each): the dims after a dim `cut` whole, a run
// of rows of `cut`, one index of each dim between N and `cut`. Pieces 0..count()-1 of a
// sample, in order, visit the share's values in its row-major order: accumulating them
// one after the other in that order sees every value in the order the whole share would.
class SamplePieces {
 public:
  SamplePieces(std::vector<Index> shape, int split, Index begin, Index end, Index budget);
  // Pieces per sample of this rank: 0 for an empty share.
  Index count() const { return count_; }
  // Piece k of sample n as a box of the dataset; k >= count(): an empty box (for the
  // collective reads a rank with fewer pieces still takes part in).
  Box piece(Index n, Index k) const;

 private:
  std::vector<Index> shape_, ext_;  // the dataset's shape; the share's extents (ext_[0] = 1)
  int split_ = 1, cut_ = 1;
  Index begin_ = 0, rows_ = 1, blocks_ = 1, count_ = 0;
};

}  // namespace tessera::io
