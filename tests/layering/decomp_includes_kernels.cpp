// Must not build: the decomp floor may not include the compute kernels.
#include "kernels/conv.hpp"
