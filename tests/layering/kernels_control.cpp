// Must build: a kernels source including its own floor and the one below, compiled the
// way the probes are, so a probe fails for the floor rule and not for its set-up.
#include "decomp/box.hpp"
#include "kernels/conv.hpp"
#include "kernels/device/memory.hpp"

int tessera_layering_control() {
  return static_cast<int>(tessera::size_of(tessera::DType::f32));
}
