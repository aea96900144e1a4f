#include "runtime/comm/mpi_datatype.hpp"

#include <climits>

#include "runtime/comm/mpi_error.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

MpiType::~MpiType() {
  if (owned_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Type_free(&t_);
  }
}

MpiType& MpiType::operator=(MpiType&& o) noexcept {
  if (this != &o) {
    if (owned_) MPI_Type_free(&t_);
    t_ = o.t_;
    owned_ = o.owned_;
    o.owned_ = false;
  }
  return *this;
}

MpiType element_type(std::size_t elem_size) {
  MPI_Datatype t;
  TESSERA_MPI(MPI_Type_contiguous(static_cast<int>(elem_size), MPI_BYTE, &t));
  TESSERA_MPI(MPI_Type_commit(&t));
  return MpiType(t);
}

int checked_count(Index n, const char* what) {
  TESSERA_CHECK(n >= 0 && n <= INT_MAX, what << ": " << n << " elements exceed MPI's int count");
  return static_cast<int>(n);
}

MpiType subarray_type(const std::vector<Index>& shape, const Box& region, std::size_t es) {
  if (region.empty()) return MpiType(MPI_BYTE, false);
  MpiType elem = element_type(es);
  const int nd = static_cast<int>(shape.size());
  if (nd == 0) return elem;  // a scalar: one element
  std::vector<int> sizes(nd), sub(nd), start(nd);
  for (int d = 0; d < nd; ++d) {
    sizes[d] = checked_count(shape[d], "subarray extent");
    sub[d] = checked_count(region.extent(d), "subarray extent");
    start[d] = checked_count(region.lo[d], "subarray start");
  }
  MPI_Datatype t;
  TESSERA_MPI(MPI_Type_create_subarray(nd, sizes.data(), sub.data(), start.data(), MPI_ORDER_C,
                                       elem.get(), &t));
  TESSERA_MPI(MPI_Type_commit(&t));
  return MpiType(t);
}

}  // namespace tessera
