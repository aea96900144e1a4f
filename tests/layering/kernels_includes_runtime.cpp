// Must not build: a kernels source may not include a runtime header.
#include "runtime/tensor/tensor.hpp"
