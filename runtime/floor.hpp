#pragma once
// Included by every runtime/ header: decomp/ and kernels/ build without MPI and may not
// reach up into the runtime (the floor macros are private compile definitions).
#if defined(TESSERA_FLOOR_DECOMP) || defined(TESSERA_FLOOR_KERNELS)
#error "runtime/ header included from decomp/ or kernels/: floors link only the floors below them"
#endif
