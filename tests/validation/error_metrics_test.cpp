#include <catch2/catch.hpp>

#include "validation/error_metrics.hpp"

using namespace perfcast;

TEST_CASE("error statistics: hand-worked values", "[validation]") {
  CHECK(relative_error(110, 100) == Approx(0.10));
  CHECK(relative_error(95, 100) == Approx(-0.05));
  CHECK_THROWS(relative_error(1, 0));
  const auto s = summarize_errors({0.10, -0.05, 0.02});
  CHECK(s.count == 3);
  CHECK(s.geomean_abs == Approx(std::cbrt(0.10 * 0.05 * 0.02)));
  CHECK(s.mape == Approx((0.10 + 0.05 + 0.02) / 3));
  CHECK(s.max_abs == Approx(0.10));
  CHECK(s.mean_signed == Approx(0.07 / 3));
}
