#include "calibrate/fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "profiler/nnls.hpp"
#include "core/error.hpp"

namespace pw {

FitQuality fit_quality(const std::vector<Residual>& residuals) {
  FitQuality q;
  q.points = static_cast<int>(residuals.size());
  if (residuals.empty()) {
    q.r2 = std::numeric_limits<double>::quiet_NaN();
    return q;
  }
  double mean = 0;
  for (const Residual& r : residuals) mean += r.measured;
  mean /= static_cast<double>(residuals.size());
  double ss_res = 0, ss_tot = 0, sq_rel = 0;
  for (const Residual& r : residuals) {
    ss_res += (r.fitted - r.measured) * (r.fitted - r.measured);
    ss_tot += (r.measured - mean) * (r.measured - mean);
    const double rel = r.measured > 0 ? (r.fitted - r.measured) / r.measured : 0;
    sq_rel += rel * rel;
    q.max_error_pct = std::max(q.max_error_pct, std::abs(rel) * 100);
  }
  // All measured values equal (to rounding): R^2 has no meaning.
  q.r2 = ss_tot > 1e-20 * mean * mean * static_cast<double>(residuals.size())
             ? 1 - ss_res / ss_tot
             : std::numeric_limits<double>::quiet_NaN();
  q.rms_error_pct = std::sqrt(sq_rel / static_cast<double>(residuals.size())) * 100;
  return q;
}

Eigen::VectorXd fit_non_negative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, double floor) {
  return fit_non_negative(X, y, y, floor);
}

Eigen::VectorXd fit_non_negative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& relative_to,
                                 double floor) {
  if (X.rows() != y.size() || relative_to.size() != y.size())
    throw_runtime("fit: {} rows of features but {} measured values", X.rows(), y.size());
  Eigen::MatrixXd A = X;
  Eigen::VectorXd b = Eigen::VectorXd::Ones(y.size());
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    const double w = 1.0 / std::max(relative_to(i), floor);
    A.row(i) *= w;
    b(i) = y(i) * w;
  }
  Eigen::VectorXd scale = Eigen::VectorXd::Zero(A.cols());
  for (Eigen::Index j = 0; j < A.cols(); ++j) {
    const double norm = A.col(j).norm();
    if (norm > 0) {
      scale(j) = 1.0 / norm;
      A.col(j) *= scale(j);
    }
  }
  const NnlsResult r = nnls(A, b);
  return r.x.cwiseProduct(scale);
}

}  // namespace pw
