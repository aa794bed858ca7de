#include <catch2/catch.hpp>

#include "core/nnls.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_nnls_test {

using perfcast::nnls;

TEST_CASE("nnls: an interior optimum equals ordinary least squares", "[nnls]") {
  // y = 2 + 3 x at x = 0, 1, 2: exact, both coefficients positive.
  Eigen::MatrixXd A(3, 2);
  A << 1, 0, 1, 1, 1, 2;
  Eigen::VectorXd b(3);
  b << 2, 5, 8;
  const auto r = nnls(A, b);
  CHECK(r.x[0] == Approx(2.0).margin(1e-12));
  CHECK(r.x[1] == Approx(3.0).margin(1e-12));
  CHECK(r.residual_norm == Approx(0.0).margin(1e-12));
  CHECK(r.converged);
}

TEST_CASE("nnls: a negative least-squares coefficient is clamped and the rest re-solved", "[nnls]") {
  // Unconstrained: y = 4 - 1 x through (0,4), (1,3), (2,2): slope -1. With x >= 0 the
  // slope is 0 and the intercept is the mean, 3 (hand-worked: minimise sum (c - y_i)^2).
  Eigen::MatrixXd A(3, 2);
  A << 1, 0, 1, 1, 1, 2;
  Eigen::VectorXd b(3);
  b << 4, 3, 2;
  const auto r = nnls(A, b);
  CHECK(r.x[0] == Approx(3.0).margin(1e-12));
  CHECK(r.x[1] == 0.0);
  CHECK(r.residual_norm == Approx(std::sqrt(2.0)).margin(1e-12));
}

TEST_CASE("nnls: the textbook 2x2 where both constraints bind one at a time", "[nnls]") {
  // A = I, b = (-1, 2): the solution is (0, 2), residual 1.
  Eigen::MatrixXd A = Eigen::MatrixXd::Identity(2, 2);
  Eigen::VectorXd b(2);
  b << -1, 2;
  const auto r = nnls(A, b);
  CHECK(r.x[0] == 0.0);
  CHECK(r.x[1] == Approx(2.0));
  CHECK(r.residual_norm == Approx(1.0));
}

TEST_CASE("nnls: the best column alone beats a pair whose solution is infeasible", "[nnls]") {
  // Columns a1 = (1, 0, 1), a2 = (0, 1, 1), a3 = (1, 1, 1); b = (1, 1, 0).
  // Hand-worked: the unconstrained solution needs x1 = x2 = -1, x3 = 2. The gradient
  // A^T b = (1, 1, 2) picks a3: x3 = (a3.b)/(a3.a3) = 2/3, residual r = (1/3, 1/3, -2/3);
  // then w = A^T r = (-1/3, -1/3, 0): optimal. x = (0, 0, 2/3), ||r|| = sqrt(2/3).
  // (Fixing x3 = 0 instead gives x1 = x2 = 1/3 with ||r|| = sqrt(4/3): worse.)
  Eigen::MatrixXd A(3, 3);
  A << 1, 0, 1, 0, 1, 1, 1, 1, 1;
  Eigen::VectorXd b(3);
  b << 1, 1, 0;
  const auto r = nnls(A, b);
  CHECK(r.x[0] == 0.0);
  CHECK(r.x[1] == 0.0);
  CHECK(r.x[2] == Approx(2.0 / 3.0).margin(1e-12));
  CHECK(r.residual_norm == Approx(std::sqrt(2.0 / 3.0)).margin(1e-12));
}

TEST_CASE("nnls: a column that entered first leaves again (Lawson-Hanson inner loop)", "[nnls]") {
  // a1 = (2, 2), a2 = (1, 0); b = (1, -0.2). Hand-worked:
  //  A^T b = (1.6, 1): a1 enters, x1 = 1.6 / 8 = 0.2, r = (0.6, -0.6), w = (0, 0.6);
  //  a2 enters; on {a1, a2} the exact solution is z = (-0.1, 1.2): infeasible, so the
  //  step goes alpha = 0.2 / (0.2 + 0.1) = 2/3 of the way, x1 reaches 0 and a1 leaves;
  //  on {a2}: x2 = 1, r = (0, -0.2), w1 = -0.4 <= 0: optimal, ||r|| = 0.2.
  Eigen::MatrixXd A(2, 2);
  A << 2, 1, 2, 0;
  Eigen::VectorXd b(2);
  b << 1, -0.2;
  const auto r = nnls(A, b);
  CHECK(r.x[0] == 0.0);
  CHECK(r.x[1] == Approx(1.0).margin(1e-12));
  CHECK(r.residual_norm == Approx(0.2).margin(1e-12));
  CHECK(r.iterations == 2);
}

TEST_CASE("nnls: all-negative target gives zero; zero columns stay zero; bad shapes throw", "[nnls]") {
  Eigen::MatrixXd A(2, 2);
  A << 1, 0, 1, 0;
  Eigen::VectorXd b(2);
  b << -1, -2;
  const auto r = nnls(A, b);
  CHECK(r.x.isZero());
  CHECK(r.residual_norm == Approx(std::sqrt(5.0)));
  CHECK_THROWS_AS(nnls(Eigen::MatrixXd(3, 2), Eigen::VectorXd(2)), std::invalid_argument);
}

TEST_CASE("nnls rule: never negative, never worse than the best single column", "[nnls][rule]") {
  // Deterministic pseudo-random problems (LCG), 6 x 4.
  std::uint64_t state = 12345;
  auto next = [&]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1;
  };
  for (int trial = 0; trial < 200; ++trial) {
    Eigen::MatrixXd A(6, 4);
    Eigen::VectorXd b(6);
    for (int i = 0; i < 6; ++i) {
      b[i] = next();
      for (int j = 0; j < 4; ++j) A(i, j) = next();
    }
    const auto r = nnls(A, b);
    REQUIRE(r.converged);
    for (int j = 0; j < 4; ++j) REQUIRE(r.x[j] >= 0);
    // KKT: gradient w = A^T (b - A x) is <= 0 where x = 0 and ~0 where x > 0.
    const Eigen::VectorXd w = A.transpose() * (b - A * r.x);
    for (int j = 0; j < 4; ++j) {
      if (r.x[j] > 0) REQUIRE(std::fabs(w[j]) < 1e-9);
      else REQUIRE(w[j] < 1e-9);
    }
    for (int j = 0; j < 4; ++j) {
      const double c = std::max(0.0, A.col(j).dot(b) / A.col(j).squaredNorm());
      REQUIRE(r.residual_norm <= (A.col(j) * c - b).norm() + 1e-12);
    }
  }
}

}  // namespace perfcast_test_core_nnls_test
