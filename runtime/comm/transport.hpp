#pragma once
// The names the communication engine shares between the halo exchange and redistribution:
// which way a plan runs, and how a message travels.
#include "runtime/floor.hpp"

namespace tessera {

// Forward inserts owners' values into ghosts (a scatter); the adjoint sends ghost values
// back and adds them into their owners (PETSc's SCATTER_REVERSE with ADD_VALUES).
enum class Direction { Forward, Adjoint };

// How one message travels:
//   InPlace:    MPI reads and writes the tensor through derived datatypes, no pack buffer;
//   Packed:     our kernels pack into a contiguous buffer, MPI sends it, we unpack;
//   NodeShared: packed into an MPI-3 shared-memory window the on-node peer unpacks from;
//   Staged:     packed on the device, then through page-locked host memory (an MPI that
//               cannot take device pointers).
// Auto lets the engine choose per message (the default).
enum class Transport { Auto, InPlace, Packed, NodeShared, Staged };

inline const char* name_of(Direction d) {
  return d == Direction::Forward ? "forward" : "adjoint";
}
inline const char* name_of(Transport t) {
  switch (t) {
    case Transport::Auto:
      return "auto";
    case Transport::InPlace:
      return "in-place";
    case Transport::Packed:
      return "packed";
    case Transport::NodeShared:
      return "node-shared";
    case Transport::Staged:
      return "staged";
  }
  return "?";
}

}  // namespace tessera
