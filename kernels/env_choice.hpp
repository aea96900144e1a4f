#pragma once
// A kernel setting chosen by an environment variable among named values (the CUDA paths of
// attention and spectral mixing): the index of the variable's value in `choices`, 0 (the
// first, the default) when it is unset; any other value is refused, naming the choices.
#include "kernels/floor.hpp"

#include <initializer_list>

namespace tessera::kernels {

int env_choice(const char* var, std::initializer_list<const char*> choices);

}  // namespace tessera::kernels
