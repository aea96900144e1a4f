#pragma once
// Included by every io/ header: the floors below (decomp, kernels, runtime) may not
// reach up into parallel HDF5.
#if defined(TESSERA_FLOOR_DECOMP) || defined(TESSERA_FLOOR_KERNELS) || \
    defined(TESSERA_FLOOR_RUNTIME)
#error "io/ header included from a floor below io/: floors link only the floors below them"
#endif
