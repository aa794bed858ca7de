// Catch2 v2 provides main() for perfcast_profiler_tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
