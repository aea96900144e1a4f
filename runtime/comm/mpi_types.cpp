#include "runtime/comm/mpi_types.hpp"

#include "runtime/comm/mpi_error.hpp"

namespace tessera {

MPI_Datatype mpi_type_of(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i64:
      return MPI_INT64_T;
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::c64:
      return MPI_C_FLOAT_COMPLEX;
    case DType::c128:
      return MPI_C_DOUBLE_COMPLEX;
  }
  throw Error("mpi_type_of: unknown dtype");
}

MPI_Datatype mpi_reducible_type_of(DType t) {
  TESSERA_CHECK(t != DType::bf16, "bfloat16 tensors cannot be reduced by MPI; convert to float32");
  return mpi_type_of(t);
}

}  // namespace tessera
