#pragma once
// TESSERA_CHECK for the kernels layer, which must not include runtime/error.hpp (it pulls
// in MPI); the macro lives at the bottom of the graph, in decomp/error.hpp.
#include "decomp/error.hpp"
