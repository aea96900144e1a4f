// Catch2 main of the serial unit tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
