#include <catch2/catch.hpp>

#include "core/units.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_units_test {

using perfcast::Dimension;
using perfcast::parse_quantity;

TEST_CASE("quantities convert to SI with decimal and binary prefixes", "[units]") {
  CHECK(parse_quantity("900GB/s", Dimension::kBandwidth) == Approx(900e9));
  CHECK(parse_quantity("400Gb/s", Dimension::kBandwidth) == Approx(50e9));  // bits
  CHECK(parse_quantity("5us", Dimension::kTime) == Approx(5e-6));
  CHECK(parse_quantity("0.94us", Dimension::kTime) == Approx(0.94e-6));
  CHECK(parse_quantity("80GiB", Dimension::kBytes) == Approx(80.0 * 1024 * 1024 * 1024));
  CHECK(parse_quantity("25MB", Dimension::kBytes) == Approx(25e6));
  CHECK(parse_quantity("989.4TFLOP/s", Dimension::kFlopRate) == Approx(989.4e12));
  CHECK(parse_quantity("1.98GHz", Dimension::kFrequency) == Approx(1.98e9));
  CHECK(parse_quantity(" 2 ms ", Dimension::kTime) == Approx(2e-3));
  CHECK(parse_quantity("1e3B", Dimension::kBytes) == Approx(1000));
}

TEST_CASE("quantity errors say what was expected", "[units]") {
  auto message = [](const char* text, Dimension d) {
    try {
      (void)parse_quantity(text, d);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message("900GB", Dimension::kBandwidth), Catch::Contains("\"GB\" is a size") && Catch::Contains("900GB/s"));
  CHECK_THAT(message("900", Dimension::kBandwidth), Catch::Contains("missing unit"));
  CHECK_THAT(message("-5us", Dimension::kTime), Catch::Contains("negative"));
  CHECK_THAT(message("fast", Dimension::kTime), Catch::Contains("no number"));
  CHECK_THAT(message("5 parsecs", Dimension::kTime), Catch::Contains("unknown unit"));
}

}  // namespace perfcast_test_core_units_test
