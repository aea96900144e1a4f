#pragma once
// TESSERA_CHECK for the kernels layer, which must not include runtime/error.hpp (it pulls
// in MPI). Same definition as there, so either header may come first.
#include <sstream>
#include <string>

#include "decomp/error.hpp"

#ifndef TESSERA_CHECK
#define TESSERA_CHECK(cond, msg)                 \
  do {                                           \
    if (!(cond)) {                               \
      std::ostringstream tessera_os_;            \
      tessera_os_ << msg;                        \
      throw ::tessera::Error(tessera_os_.str()); \
    }                                            \
  } while (0)
#endif
