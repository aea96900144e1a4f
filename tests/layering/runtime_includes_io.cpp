// Must not build: the runtime may not include parallel HDF5 I/O.
#include "io/file.hpp"
