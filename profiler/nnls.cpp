#include "profiler/nnls.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace pw {
namespace {

// Least squares on the passive columns only; the other entries stay 0.
Eigen::VectorXd passive_solve(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const std::vector<bool>& passive) {
  std::vector<Eigen::Index> cols;
  for (Eigen::Index j = 0; j < A.cols(); ++j)
    if (passive[static_cast<size_t>(j)]) cols.push_back(j);
  Eigen::MatrixXd Ap(A.rows(), static_cast<Eigen::Index>(cols.size()));
  for (size_t k = 0; k < cols.size(); ++k) Ap.col(static_cast<Eigen::Index>(k)) = A.col(cols[k]);
  const Eigen::VectorXd zp = Ap.colPivHouseholderQr().solve(b);
  Eigen::VectorXd z = Eigen::VectorXd::Zero(A.cols());
  for (size_t k = 0; k < cols.size(); ++k) z(cols[k]) = zp(static_cast<Eigen::Index>(k));
  return z;
}

}  // namespace

NnlsResult nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b) {
  if (A.rows() != b.size()) throw_runtime("nnls: {} rows in A but {} values in b", A.rows(), b.size());
  if (!A.allFinite() || !b.allFinite()) throw_runtime("nnls: A or b holds a value that is not finite");
  const Eigen::Index n = A.cols();
  NnlsResult r;
  r.x = Eigen::VectorXd::Zero(n);
  if (n == 0 || A.rows() == 0) {
    r.residual = b.norm();
    return r;
  }
  // The tolerance of the dual's sign test: the rounding of A^T r (scipy's choice).
  const double tol = 10 * std::numeric_limits<double>::epsilon() * A.cwiseAbs().colwise().sum().maxCoeff() *
                     static_cast<double>(std::max(A.rows(), n));
  std::vector<bool> passive(static_cast<size_t>(n), false);
  const int max_iterations = 30 * static_cast<int>(n);
  Eigen::VectorXd w = A.transpose() * (b - A * r.x);
  while (r.iterations < max_iterations) {
    // The active variable whose increase lowers the residual most.
    Eigen::Index t = -1;
    double best = tol;
    for (Eigen::Index j = 0; j < n; ++j)
      if (!passive[static_cast<size_t>(j)] && w(j) > best) {
        best = w(j);
        t = j;
      }
    if (t < 0) break;
    passive[static_cast<size_t>(t)] = true;
    ++r.iterations;
    for (;;) {
      Eigen::VectorXd z = passive_solve(A, b, passive);
      bool feasible = true;
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)] && z(j) <= 0) feasible = false;
      if (feasible) {
        r.x = z;
        break;
      }
      // Step from x towards z as far as feasibility allows, then drop the variables that reached 0.
      double alpha = std::numeric_limits<double>::infinity();
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)] && z(j) <= 0) alpha = std::min(alpha, r.x(j) / (r.x(j) - z(j)));
      r.x += alpha * (z - r.x);
      bool dropped = false;
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)] && r.x(j) <= tol) {
          passive[static_cast<size_t>(j)] = false;
          r.x(j) = 0;
          dropped = true;
        }
      if (!dropped) break;  // rounding: nothing reached 0 exactly; keep the feasible point
    }
    w = A.transpose() * (b - A * r.x);
  }
  r.x = r.x.cwiseMax(0.0);
  r.residual = (A * r.x - b).norm();
  return r;
}

}  // namespace pw
