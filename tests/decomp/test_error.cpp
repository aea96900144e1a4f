// tessera::Error's record of the error unwinding (last_error_message): set as an Error is
// raised, kept while it is in flight (copied or not), forgotten once it is handled, so a
// later non-Error unwinding (std::bad_alloc) names no stale message.
#include <catch2/catch.hpp>

#include <new>

#include "decomp/error.hpp"

using namespace tessera;

TEST_CASE("last_error_message: the Error in flight, forgotten once handled", "[error]") {
  try {
    TESSERA_CHECK(false, "first " << 1);
  } catch (const Error& e) {
    CHECK(last_error_message() == "first 1");  // still alive: being handled
  }
  CHECK(last_error_message().empty());  // handled and gone

  std::string seen;
  try {
    try {
      throw std::bad_alloc();
    } catch (...) {
      seen = last_error_message();
      throw;
    }
  } catch (const std::bad_alloc&) {
  }
  CHECK(seen.empty());  // not the old "first 1"
}

TEST_CASE("last_error_message: a copy in flight keeps it, a newer Error takes over", "[error]") {
  try {
    try {
      throw Error("inner");
    } catch (const Error& e) {
      throw e;  // a copy; the original goes at the end of this handler
    }
  } catch (const Error& e) {
    CHECK(last_error_message() == "inner");
    CHECK(std::string(e.what()) == "inner");
  }
  CHECK(last_error_message().empty());
  try {
    const Error handled("handled");
    throw AllocationError("allocation");
  } catch (const Error& e) {
    CHECK(last_error_message() == "allocation");
  }
}
