#pragma once
// The message of the tessera::Error that f throws ("" if it returns), so MPI tests can
// check error texts with the collective MPI_CHECK.
#include <string>

#include "decomp/error.hpp"

namespace tessera::test {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace tessera::test

// Collective: `expr` throws a tessera::Error whose message contains `part` on every rank.
#define MPI_CHECK_ERROR(expr, part) \
  MPI_CHECK(::tessera::test::has(::tessera::test::error_of([&] { (void)(expr); }), part))
