#pragma once
// tessera::Error is the one exception type of the project. It lives at the bottom of
// the dependency graph (decomp/ includes nothing else) so every layer can throw it.
#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace tessera
