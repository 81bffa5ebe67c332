#pragma once
// Non-negative least squares: min ||A x - b|| subject to x >= 0, by Lawson and Hanson's active-set method
// ("Solving Least Squares Problems", 1974, chapter 23). Every cost term pipewright fits (an overhead, a
// time per FLOP, a time per byte) is physically non-negative, so the fits solve this rather than the
// unconstrained problem, whose noise-driven negative coefficients would extrapolate to negative times.
#include <Eigen/Dense>

namespace pw {

struct NnlsResult {
  Eigen::VectorXd x;    // the solution, every entry >= 0
  double residual = 0;  // ||A x - b||
  int iterations = 0;   // variables moved into the passive set
};

// Throws Runtime when A and b disagree in size or hold a value that is not finite; rank-deficient A is
// fine (the passive set then keeps one of the dependent columns and leaves the others at 0).
NnlsResult nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b);

}  // namespace pw
