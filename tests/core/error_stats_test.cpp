#include <cmath>

#include <catch2/catch.hpp>

#include "core/error_stats.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_error_stats_test {

using namespace perfcast;

TEST_CASE("error statistics: hand-worked values", "[core]") {
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

TEST_CASE("error statistics: the floor of |error| in the geometric mean, and no errors", "[core]") {
  // An exact prediction counts as |error| = floor: geomean of {1e-9, 0.01} = sqrt(1e-11).
  CHECK(geomean_abs_error({0.0, -0.01}) == Approx(std::sqrt(1e-9 * 0.01)));
  CHECK(geomean_abs_error({0.0, -0.01}, 1e-6) == Approx(std::sqrt(1e-6 * 0.01)));
  // The floor moves only the geometric mean.
  const auto s = summarize_errors({0.0, -0.01}, 1e-6);
  CHECK(s.mape == Approx(0.005));
  CHECK(s.max_abs == Approx(0.01));
  CHECK(s.mean_signed == Approx(-0.005));
  const auto none = summarize_errors({});
  CHECK(none.count == 0);
  CHECK(none.geomean_abs == 0);
  CHECK(none.mape == 0);
  CHECK(none.max_abs == 0);
  CHECK(none.mean_signed == 0);
}

}  // namespace perfcast_test_core_error_stats_test
