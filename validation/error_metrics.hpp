#pragma once
/// \file error_metrics.hpp
/// Prediction-against-measurement error statistics used by `validate` and the README
/// tables, with the reference paper's definitions (docs/reference-paper.md section 2):
/// error = predicted / measured - 1; GMAE = geometric mean of |error|.

#include <vector>

namespace perfcast {

/// predicted / measured - 1. Throws std::invalid_argument unless measured > 0.
[[nodiscard]] double relative_error(double predicted, double measured);

struct ErrorSummary {
  std::size_t count = 0;
  double geomean_abs = 0;  ///< geometric mean of |error| (zero errors floored at 1e-9)
  double mape = 0;         ///< mean of |error|
  double max_abs = 0;
  double mean_signed = 0;  ///< bias: mean of error
};

[[nodiscard]] ErrorSummary summarize_errors(const std::vector<double>& errors);

}  // namespace perfcast
