#pragma once
/// \file nnls.hpp
/// Non-negative least squares: minimise ||A x - b||_2 subject to x >= 0, by the active-set
/// method of Lawson and Hanson ("Solving Least Squares Problems", 1974, chapter 23,
/// algorithm NNLS). The one solver every fit in perfcast uses (kernel calibration,
/// collective calibration, host-cost fits): weights go into the rows of A and b.

#include <Eigen/Dense>

namespace perfcast {

struct NnlsResult {
  Eigen::VectorXd x;         ///< the solution, every entry >= 0
  double residual_norm = 0;  ///< ||A x - b||_2
  int iterations = 0;        ///< outer iterations (columns moved into the passive set)
  bool converged = true;     ///< false only when the iteration cap (3 x columns) was reached
};

/// Lawson-Hanson NNLS. A is m x n (any m >= 1, n >= 1), b has m rows. Columns that are
/// all zero stay at 0. Tolerance: a gradient entry must exceed 1e-12 x (|A|_max |b|_max)
/// for its column to enter, which keeps round-off from cycling.
[[nodiscard]] NnlsResult nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b);

}  // namespace perfcast
