// Must not build: the kernels floor has no MPI (linked from runtime up).
#include <mpi.h>
