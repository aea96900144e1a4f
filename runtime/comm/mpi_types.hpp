#pragma once
// MPI datatypes for Tessera dtypes.
#include "runtime/floor.hpp"
#include <mpi.h>

#include "decomp/dtype.hpp"

namespace tessera {

// The MPI type of one element (bf16 travels as 2 bytes: it is never reduced by MPI).
MPI_Datatype mpi_type_of(DType t);
// Throws for bf16: MPI cannot sum it.
MPI_Datatype mpi_reducible_type_of(DType t);

}  // namespace tessera
