#include "core/nnls.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace perfcast {
namespace {

/// Unconstrained least squares on the passive columns P; the others are 0.
Eigen::VectorXd solve_on(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const std::vector<bool>& passive) {
  std::vector<Eigen::Index> cols;
  for (Eigen::Index j = 0; j < A.cols(); ++j)
    if (passive[static_cast<std::size_t>(j)]) cols.push_back(j);
  Eigen::VectorXd z = Eigen::VectorXd::Zero(A.cols());
  if (cols.empty()) return z;
  Eigen::MatrixXd sub(A.rows(), static_cast<Eigen::Index>(cols.size()));
  for (std::size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = A.col(cols[k]);
  const Eigen::VectorXd s = sub.colPivHouseholderQr().solve(b);
  for (std::size_t k = 0; k < cols.size(); ++k) z[cols[k]] = s[static_cast<Eigen::Index>(k)];
  return z;
}

}  // namespace

NnlsResult nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b) {
  if (A.rows() != b.rows() || A.cols() == 0 || A.rows() == 0)
    throw std::invalid_argument("nnls: A must be m x n with m, n >= 1 and b of m rows");
  const Eigen::Index n = A.cols();
  const auto un = static_cast<std::size_t>(n);
  NnlsResult r;
  r.x = Eigen::VectorXd::Zero(n);
  std::vector<bool> passive(un, false);
  const double scale = std::max(A.cwiseAbs().maxCoeff(), 1e-300) * std::max(b.cwiseAbs().maxCoeff(), 1e-300);
  const double tol = 1e-12 * scale;
  // Round-off can make an entering column's solution non-positive, so that it leaves again
  // at once and re-enters: the cap ends that cycle.
  const int max_outer = 3 * static_cast<int>(n);
  for (;;) {
    // Gradient of -1/2 ||Ax - b||^2: w = A^T (b - A x). Optimal when w <= 0 on the active set.
    const Eigen::VectorXd w = A.transpose() * (b - A * r.x);
    Eigen::Index enter = -1;
    double best = tol;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (!passive[static_cast<std::size_t>(j)] && w[j] > best) {
        best = w[j];
        enter = j;
      }
    }
    if (enter < 0) break;
    if (r.iterations >= max_outer) {
      r.converged = false;
      break;
    }
    ++r.iterations;
    passive[static_cast<std::size_t>(enter)] = true;
    // Inner loop: step towards the unconstrained solution on P until it is feasible.
    for (int inner = 0; inner <= n; ++inner) {
      const Eigen::VectorXd z = solve_on(A, b, passive);
      bool feasible = true;
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<std::size_t>(j)] && z[j] <= 0) feasible = false;
      if (feasible) {
        r.x = z;
        break;
      }
      double alpha = std::numeric_limits<double>::infinity();
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[static_cast<std::size_t>(j)] && z[j] <= 0) alpha = std::min(alpha, r.x[j] / (r.x[j] - z[j]));
      }
      if (!std::isfinite(alpha)) alpha = 0;
      r.x += alpha * (z - r.x);
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[static_cast<std::size_t>(j)] && r.x[j] <= 1e-15 * std::max(1.0, std::fabs(z[j]))) {
          passive[static_cast<std::size_t>(j)] = false;
          r.x[j] = 0;
        }
      }
    }
  }
  for (Eigen::Index j = 0; j < n; ++j) r.x[j] = std::max(0.0, r.x[j]);
  r.residual_norm = (A * r.x - b).norm();
  return r;
}

}  // namespace perfcast
