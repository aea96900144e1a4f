#pragma once
// Error checking for the runtime: TESSERA_CHECK for local invariants, checked MPI calls.
// A check that one rank may fail while others pass must use collective_check()
// (runtime/collective_error.hpp) instead, so that no rank is left waiting.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <sstream>
#include <string>

#include "decomp/error.hpp"

namespace tessera {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

}  // namespace tessera

#define TESSERA_MPI(call)                                                 \
  do {                                                                    \
    const int tessera_rc_ = (call);                                       \
    if (tessera_rc_ != MPI_SUCCESS)                                       \
      ::tessera::throw_mpi_error(tessera_rc_, #call, __FILE__, __LINE__); \
  } while (0)
