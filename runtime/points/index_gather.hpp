#pragma once
// IndexGather: rows of a per-point tensor split over the ranks of a communicator in
// contiguous ranges of global index (rank r holds [offsets[r], offsets[r + 1])), fetched by
// global index. forward() gives the rows of any list of indices (-1: a zero row, as the
// neighbour lists pad), each distinct index fetched once; adjoint() sums gradients of those
// rows back into the ranks that hold them, in a fixed order (by requesting rank, then by
// index), so the result does not depend on timing. One plan (who asks whom for which rows),
// made once, serves both: the neighbourhood gather of point layers and its exact adjoint.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "runtime/tensor/tensor.hpp"

namespace tessera {

class IndexGather {
 public:
  // Collective over comm. offsets: comm size + 1 entries, the same on every rank; wanted:
  // global indices (or -1) this rank needs.
  IndexGather(MPI_Comm comm, const std::vector<Index>& offsets,
              const std::vector<std::int64_t>& wanted);

  Index wanted() const { return static_cast<Index>(slot_.size()); }
  Index held() const { return held_; }
  // This rank's rows (held(), ...) -> the wanted rows (wanted(), ...), host tensors.
  Tensor forward(const Tensor& rows) const;
  // Gradients of the wanted rows (wanted(), ...) summed into the held rows (held(), ...),
  // float32 or float64.
  Tensor adjoint(const Tensor& grads) const;

 private:
  MPI_Comm comm_;
  Index held_ = 0;
  std::vector<Index> slot_;        // per wanted entry: its distinct index's slot, -1 for none
  Index distinct_ = 0;             // distinct indices asked for (slots, ordered by holder)
  std::vector<Index> serve_rows_;  // held rows others asked for, by requesting rank
  std::vector<Index> ask_count_, serve_count_;  // rows per peer
};

}  // namespace tessera
