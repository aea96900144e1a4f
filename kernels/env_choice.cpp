#include "kernels/env_choice.hpp"

#include <cstdlib>
#include <string>

#include "decomp/error.hpp"

namespace tessera::kernels {

int env_choice(const char* var, std::initializer_list<const char*> choices) {
  const char* v = std::getenv(var);
  if (!v) return 0;
  int i = 0;
  for (const char* c : choices) {
    if (std::string(v) == c) return i;
    ++i;
  }
  std::string names;  // "a, b or c"
  const int n = static_cast<int>(choices.size());
  i = 0;
  for (const char* c : choices) {
    names += i == 0 ? "" : i == n - 1 ? " or " : ", ";
    names += c;
    ++i;
  }
  TESSERA_CHECK(false, var << " is '" << v << "': " << names);
  return 0;
}

}  // namespace tessera::kernels
