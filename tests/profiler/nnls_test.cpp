// Lawson-Hanson NNLS against solutions known in closed form and against brute force over every active set.
#include <catch2/catch.hpp>

#include <cstdint>

#include "profiler/nnls.hpp"
#include "executor/cpu_tensor.hpp"
#include "../error_text.hpp"


TEST_CASE("nnls equals least squares when the unconstrained solution is positive") {
  Eigen::MatrixXd A(5, 3);
  A << 1, 0, 2, 1, 1, 0, 1, 2, 1, 1, 3, 1, 1, 4, 0;
  const Eigen::Vector3d x(1, 2, 3);
  const pw::NnlsResult r = pw::nnls(A, A * x);
  CHECK((r.x - x).norm() < 1e-10);
  CHECK(r.residual < 1e-10);
}

TEST_CASE("nnls clamps a negative least-squares slope to 0 and refits the rest") {
  // b falls with the second column: least squares gives (4, -1). With x2 = 0 the best x1 is mean(b) = 2,
  // and the gradient for x2, A2^T (b - A x) = [1 2 3] . [1 0 -1] = -2 < 0, so (2, 0) is optimal.
  Eigen::MatrixXd A(3, 2);
  A << 1, 1, 1, 2, 1, 3;
  const Eigen::Vector3d b(3, 2, 1);
  const pw::NnlsResult r = pw::nnls(A, b);
  CHECK(r.x(0) == Approx(2.0).epsilon(1e-12));
  CHECK(r.x(1) == 0.0);
  CHECK(r.residual == Approx(std::sqrt(2.0)).epsilon(1e-12));
}

TEST_CASE("nnls on the identity projects b onto the non-negative orthant") {
  const Eigen::MatrixXd A = Eigen::MatrixXd::Identity(4, 4);
  const Eigen::Vector4d b(1, -1, 0.5, -2);
  const pw::NnlsResult r = pw::nnls(A, b);
  CHECK((r.x - Eigen::Vector4d(1, 0, 0.5, 0)).norm() < 1e-14);
  CHECK(r.residual == Approx(std::sqrt(5.0)));
}

TEST_CASE("nnls with dependent columns still fits exactly") {
  Eigen::MatrixXd A(2, 2);
  A << 1, 1, 2, 2;
  const Eigen::Vector2d b(1, 2);
  const pw::NnlsResult r = pw::nnls(A, b);
  CHECK(r.x.minCoeff() >= 0);
  CHECK(r.x.sum() == Approx(1.0));
  CHECK(r.residual < 1e-12);
}

TEST_CASE("nnls reaches the brute-force optimum over every active set") {
  // The NNLS optimum is the least-squares solution on some subset of columns with all entries >= 0;
  // trying all 2^n subsets finds the smallest residual among those.
  pw::Rng rng(42);  // a deterministic stream; entries in [-1, 1)
  for (int trial = 0; trial < 200; ++trial) {
    const int m = 8, n = 4;
    Eigen::MatrixXd A(m, n);
    Eigen::VectorXd b(m);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) A(i, j) = rng.uniform() * 2 - 1;
      b(i) = rng.uniform() * 2 - 1;
    }
    double best = b.norm();
    for (int mask = 1; mask < (1 << n); ++mask) {
      std::vector<int> cols;
      for (int j = 0; j < n; ++j)
        if (mask & (1 << j)) cols.push_back(j);
      Eigen::MatrixXd As(m, static_cast<Eigen::Index>(cols.size()));
      for (size_t k = 0; k < cols.size(); ++k) As.col(static_cast<Eigen::Index>(k)) = A.col(cols[k]);
      const Eigen::VectorXd z = As.colPivHouseholderQr().solve(b);
      if (z.minCoeff() < 0) continue;
      best = std::min(best, (As * z - b).norm());
    }
    const pw::NnlsResult r = pw::nnls(A, b);
    INFO("trial " << trial);
    CHECK(r.x.minCoeff() >= 0);
    CHECK(r.residual == Approx(best).epsilon(1e-9).margin(1e-12));
  }
}

TEST_CASE("nnls rejects sizes that disagree and values that are not finite") {
  CHECK(bad_input([] { pw::nnls(Eigen::MatrixXd::Ones(3, 2), Eigen::VectorXd::Ones(2)); }) ==
        "runtime error: nnls: 3 rows in A but 2 values in b");
  Eigen::MatrixXd A = Eigen::MatrixXd::Ones(2, 2);
  A(0, 1) = std::nan("");
  CHECK(bad_input([&] { pw::nnls(A, Eigen::VectorXd::Ones(2)); }) ==
        "runtime error: nnls: A or b holds a value that is not finite");
}
