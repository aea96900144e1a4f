#pragma once
// tessera::Error is the one exception type of the project. It lives at the bottom of
// the dependency graph (decomp/ includes nothing else) so every layer can throw it.
#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace tessera

// Throws tessera::Error with a streamed message unless cond holds: a local check. One
// that one rank may fail while others pass must be collective (runtime/collective_error.hpp).
#define TESSERA_CHECK(cond, msg)                 \
  do {                                           \
    if (!(cond)) {                               \
      std::ostringstream tessera_os_;            \
      tessera_os_ << msg;                        \
      throw ::tessera::Error(tessera_os_.str()); \
    }                                            \
  } while (0)
