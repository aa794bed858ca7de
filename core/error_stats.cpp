/// \file error_stats.cpp
/// Error statistics with the definitions of error_stats.hpp.

#include "core/error_stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace perfcast {

double relative_error(double predicted, double measured) {
  if (!(measured > 0)) throw std::invalid_argument("relative_error: the measured value must be positive");
  return predicted / measured - 1.0;
}

ErrorSummary summarize_errors(const std::vector<double>& errors, double floor) {
  ErrorSummary s;
  s.count = errors.size();
  if (errors.empty()) return s;
  double log_sum = 0;
  for (double e : errors) {
    const double a = std::fabs(e);
    log_sum += std::log(std::max(a, floor));
    s.mape += a;
    s.mean_signed += e;
    s.max_abs = std::max(s.max_abs, a);
  }
  const auto n = static_cast<double>(errors.size());
  s.geomean_abs = std::exp(log_sum / n);
  s.mape /= n;
  s.mean_signed /= n;
  return s;
}

double geomean_abs_error(const std::vector<double>& errors, double floor) { return summarize_errors(errors, floor).geomean_abs; }

}  // namespace perfcast
