#pragma once
// Included by every kernels/ header: the decomp floor (pure geometry) builds with
// TESSERA_FLOOR_DECOMP defined and may not reach up into the compute kernels.
#if defined(TESSERA_FLOOR_DECOMP)
#error "kernels/ header included from decomp/: floors link only the floors below them"
#endif
