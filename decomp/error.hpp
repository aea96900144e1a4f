#pragma once
// tessera::Error is the one exception type of the project (with one refinement,
// AllocationError, for memory that was refused or not obtained, so a caller that knows what
// the memory was for can say so). It lives at the bottom of the dependency graph (decomp/
// includes nothing else) so every layer can throw it.
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

namespace detail {
struct LastError {
  std::string text;
  std::uint64_t serial = 0;  // of the Error whose text it is
  std::uint64_t next = 0;
};
inline LastError& last_error() {
  thread_local LastError e;
  return e;
}
}  // namespace detail

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) { record(); }
  Error(const Error& o) : std::runtime_error(o) { record(); }
  Error& operator=(const Error& o) {
    std::runtime_error::operator=(o);
    record();
    return *this;
  }
  // A handled error is forgotten: a later unwinding (std::bad_alloc) does not take its text.
  ~Error() override {
    detail::LastError& e = detail::last_error();
    if (e.serial == serial_) e.text.clear();
  }

 private:
  void record() {
    detail::LastError& e = detail::last_error();
    e.text = what();
    serial_ = e.serial = ++e.next;
  }
  std::uint64_t serial_ = 0;
};

class AllocationError : public Error {
 public:
  using Error::Error;
};

// The message of the Error that is unwinding on this thread, the latest one constructed and
// not yet destroyed ("" if none). A destructor that runs while an error unwinds cannot see
// the exception; this is how it names the error (an HDF5 file closed under a watch,
// runtime/comm/bounded_failure.hpp).
inline const std::string& last_error_message() {
  return detail::last_error().text;
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
