#pragma once
// Kernels that keep an n-long array per thread (a head's accumulators, a point's slice
// logits) take its length as a template bound: with_register_bucket(n, ...) runs
// f.template operator()<Max>() for the smallest of 16, 32, 64, 128 holding n, and refuses
// longer arrays with a clear error naming `what` and `noun`.
#include "kernels/floor.hpp"
#include <string>

#include "decomp/error.hpp"
#include "decomp/index.hpp"

namespace tessera::kernels {

template <class F>
void with_register_bucket(Index n, const char* what, const char* noun, F&& f) {
  if (n <= 16) return f.template operator()<16>();
  if (n <= 32) return f.template operator()<32>();
  if (n <= 64) return f.template operator()<64>();
  if (n <= 128) return f.template operator()<128>();
  throw Error(std::string(what) + ": " + std::to_string(n) + " " + noun +
              " exceed the CUDA kernel's 128");
}

}  // namespace tessera::kernels
