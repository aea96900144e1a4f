#include "io/pieces.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

#include "decomp/error.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::io {

Index piece_bytes() {
  const char* v = std::getenv("TESSERA_IO_PIECE_BYTES");
  if (!v || !*v) return kPieceBytes;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  TESSERA_CHECK(end && *end == '\0' && errno == 0 && x >= 1,
                "environment variable TESSERA_IO_PIECE_BYTES='"
                    << v << "' is not a whole number of bytes >= 1");
  return static_cast<Index>(x);
}

SamplePieces::SamplePieces(std::vector<Index> shape, int split, Index begin, Index end,
                           Index budget)
    : shape_(std::move(shape)), split_(split), begin_(begin) {
  const int nd = static_cast<int>(shape_.size());
  TESSERA_CHECK(nd >= 2 && split >= 1 && split < nd && 0 <= begin &&
                    end <= shape_[static_cast<std::size_t>(split)],
                "SamplePieces: a share [" << begin << ", " << end << ") of dim " << split
                                          << " of shape " << shape_str(shape_));
  ext_ = shape_;
  ext_[0] = 1;
  ext_[static_cast<std::size_t>(split)] = std::max<Index>(end - begin, 0);
  for (int d = 1; d < nd; ++d)
    if (ext_[static_cast<std::size_t>(d)] == 0) return;  // an empty share: no pieces
  budget = std::max<Index>(budget, 1);
  // The dims after cut whole while they fit the budget; cut itself in runs of rows.
  cut_ = nd - 1;
  Index inner = 1;
  while (cut_ > 1 && ext_[static_cast<std::size_t>(cut_)] <= budget / inner)
    inner *= ext_[static_cast<std::size_t>(cut_--)];
  const Index cext = ext_[static_cast<std::size_t>(cut_)];
  rows_ = std::clamp<Index>(budget / inner, 1, cext);
  blocks_ = (cext + rows_ - 1) / rows_;
  Index outer = 1;
  for (int d = 1; d < cut_; ++d) outer *= ext_[static_cast<std::size_t>(d)];
  count_ = outer * blocks_;
}

Box SamplePieces::piece(Index n, Index k) const {
  const int nd = static_cast<int>(shape_.size());
  Box box = Box::from_shape(shape_);
  box.lo[0] = n, box.hi[0] = n + 1;
  if (k < 0 || k >= count_) {
    for (int d = 0; d < nd; ++d) box.hi[d] = box.lo[d];  // selects none
    return box;
  }
  Index o = k / blocks_;
  const Index b = k % blocks_;
  for (int d = cut_ - 1; d >= 1; --d) {  // one index of each dim between N and cut
    const Index x = ext_[static_cast<std::size_t>(d)];
    const Index lo = (d == split_ ? begin_ : 0) + o % x;
    box.lo[d] = lo, box.hi[d] = lo + 1;
    o /= x;
  }
  const Index base = cut_ == split_ ? begin_ : 0, cext = ext_[static_cast<std::size_t>(cut_)];
  box.lo[cut_] = base + b * rows_;
  box.hi[cut_] = base + std::min(cext, (b + 1) * rows_);
  // The dims after cut are whole, but for the split dim: this rank's range.
  if (split_ > cut_)
    box.lo[split_] = begin_, box.hi[split_] = begin_ + ext_[static_cast<std::size_t>(split_)];
  return box;
}

}  // namespace tessera::io
