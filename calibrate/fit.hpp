#pragma once
// A non-negative linear fit y = X c (c >= 0) on relative error, and the numbers that say how good it is.
#include <Eigen/Dense>

#include <cmath>

#include <string>
#include <vector>

namespace pw {

// How well fitted values match the measured ones.
struct FitQuality {
  int points = 0;
  // 1 - SS_res / SS_tot over the measured values (not weighted); NaN when they are all equal, where it
  // says nothing (the table and the JSON then show none).
  double r2 = 0;
  double rms_error_pct = 0;  // root mean square of (fitted - measured) / measured, in percent
  double max_error_pct = 0;  // largest |fitted - measured| / measured, in percent
};

// One measured point beside its fitted value. `label` says which point: "b=2 s=32", "4 MiB", a run's path.
struct Residual {
  std::string label;
  double measured = 0;
  double fitted = 0;
};

FitQuality fit_quality(const std::vector<Residual>& residuals);

// Minimises sum ((X c - y) / y)^2 over c >= 0: each point counts by its relative error, so that a large
// micro-batch does not drown a small one. Columns are scaled to unit norm before the solve (the features
// differ by many orders of magnitude: 1, FLOPs, bytes) and all-zero columns get coefficient 0. Measured
// values below `floor` are weighted as `floor`. Throws Runtime on sizes that disagree.
Eigen::VectorXd fit_non_negative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, double floor = 1e-9);
// The same with each point's error relative to `relative_to` (a total the target is part of).
Eigen::VectorXd fit_non_negative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& relative_to,
                                 double floor = 1e-9);

// A one-dimensional minimum of f by golden-section search on [lo, hi] (40 steps), for a bracket found on
// a grid whose best point was `best_x` with value `best_value`: the refined point when it is better, else
// `best_x`.
template <typename F>
double golden_minimum(F&& f, double lo, double hi, double best_x, double best_value) {
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
  double fa = f(a), fb = f(b);
  for (int i = 0; i < 40; ++i) {
    if (fa <= fb) {
      hi = b;
      b = a;
      fb = fa;
      a = hi - phi * (hi - lo);
      fa = f(a);
    } else {
      lo = a;
      a = b;
      fa = fb;
      b = lo + phi * (hi - lo);
      fb = f(b);
    }
  }
  const double refined = (lo + hi) / 2;
  return f(refined) < best_value ? refined : best_x;
}

}  // namespace pw
