#pragma once
// tessera::Error is the one exception type of the project. It lives at the bottom of
// the dependency graph (decomp/ includes nothing else) so every layer can throw it.
#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

namespace detail {
inline std::string& last_error_text() {
  thread_local std::string text;
  return text;
}
}  // namespace detail

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {
    detail::last_error_text() = what;
  }
};

// The message of the latest Error constructed on this thread ("" if none). A destructor that
// runs while an error unwinds cannot see the exception; this is how it names the error (an
// HDF5 file closed under a watch, runtime/comm/bounded_failure.hpp).
inline const std::string& last_error_message() {
  return detail::last_error_text();
}

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
