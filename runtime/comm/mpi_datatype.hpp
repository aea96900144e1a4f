#pragma once
// RAII MPI datatypes, and subarray types that describe a box of a contiguous
// row-major host buffer, so MPI packs straight into its transport buffers.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "decomp/box.hpp"

namespace tessera {

class MpiType {
 public:
  MpiType() = default;
  explicit MpiType(MPI_Datatype t, bool owned = true) : t_(t), owned_(owned) {}
  ~MpiType();
  MpiType(MpiType&& o) noexcept : t_(o.t_), owned_(o.owned_) { o.owned_ = false; }
  MpiType& operator=(MpiType&& o) noexcept;
  MpiType(const MpiType&) = delete;
  MpiType& operator=(const MpiType&) = delete;
  MPI_Datatype get() const { return t_; }

 private:
  MPI_Datatype t_ = MPI_BYTE;
  bool owned_ = false;
};

// An opaque element of `elem_size` bytes (moved, never reduced).
MpiType element_type(std::size_t elem_size);
// Box `region` (in the index space [0, shape)) of a contiguous row-major buffer.
// An empty region gives MPI_BYTE, to be sent with count 0.
MpiType subarray_type(const std::vector<Index>& shape, const Box& region, std::size_t elem_size);

// Element counts and displacements must fit MPI's int; throws with `what` if not.
int checked_count(Index n, const char* what);

}  // namespace tessera
