#pragma once
/// \file error_stats.hpp
/// Prediction-against-measurement error statistics, the one definition every report
/// uses (validate, replay, kernel and collective calibration, the bench checks).
///
/// Definitions:
///  - error e_i = predicted_i / measured_i - 1 (relative_error; +0.10: 10 % too slow);
///  - geomean |error| (GMAE) = exp(mean_i ln max(|e_i|, floor)); the floor keeps an exact
///    prediction from sending the mean to zero: kErrorFloor (1e-9) by default, 1e-6 where a
///    report says so (replay, whose times are whole microseconds);
///  - MAPE = mean_i |e_i|;
///  - bias = mean_i e_i (signed: > 0 predicts too slow on average);
///  - max |error| = max_i |e_i|.
/// Over no errors every statistic is 0.

#include <cstddef>
#include <vector>

namespace perfcast {

/// The default floor of |error| in the geometric mean.
inline constexpr double kErrorFloor = 1e-9;

/// predicted / measured - 1. Throws std::invalid_argument unless measured > 0.
[[nodiscard]] double relative_error(double predicted, double measured);

struct ErrorSummary {
  std::size_t count = 0;
  double geomean_abs = 0;  ///< geometric mean of |error| (each floored, see the file comment)
  double mape = 0;         ///< mean of |error|
  double max_abs = 0;      ///< max of |error|
  double mean_signed = 0;  ///< bias: mean of error
};

/// All statistics of `errors` (relative errors, in order; the order only affects rounding).
[[nodiscard]] ErrorSummary summarize_errors(const std::vector<double>& errors, double floor = kErrorFloor);

/// summarize_errors(errors, floor).geomean_abs.
[[nodiscard]] double geomean_abs_error(const std::vector<double>& errors, double floor = kErrorFloor);

}  // namespace perfcast
