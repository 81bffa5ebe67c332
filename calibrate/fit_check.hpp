#pragma once
// Whether a calibration can be trusted, judged on its own numbers: the run fit must explain the runs'
// step times better than their mean does (step-time R^2 not negative), and on the runs held out it must
// predict about as well as the profile alone or better (median |error| at most kHeldOutTolerancePct
// above the profile's). Runs measured on a shared machine (`pipewright run` says so) are the usual cause.
#include <string>
#include <vector>

namespace pw {

struct Calibration;
struct HeldOutPoint;

// How far (percentage points) the calibrated held-out error may exceed the profile's before the fit is
// poor: repeats on a quiet machine put them within a few tenths of each other when both are small.
inline constexpr double kHeldOutTolerancePct = 1.0;

struct FitCheck {
  double step_r2 = 0;                     // the run fit's step-time R^2; NaN when not fitted or undefined
  double held_out_error_pct = 0;          // median |error| of the calibrated model on the held-out runs; NaN: none
  double profile_held_out_error_pct = 0;  // the profile alone on the same runs; NaN: none
  int runs = 0;                           // runs read
  int shared_runs = 0;                    // of them, runs whose `run` found the machine shared
  std::vector<std::string> problems;      // what is poor, one clause each; empty: the fit passed
  bool accepted = false;                  // written although poor (--accept-poor-fit)

  bool poor() const { return !problems.empty(); }
};

// The median |predicted - measured| / measured in percent over the points with a prediction, or NaN.
double median_abs_error_pct(const std::vector<HeldOutPoint>& points, double HeldOutPoint::*predicted);

// The check of `c` (its run overheads and held-out runs); `shared_runs` of its runs were measured on a
// shared machine.
FitCheck check_fit(const Calibration& c, int shared_runs);

// One line for a poor fit: "the run fit predicts the step times worse than their mean does (step-time
// R^2 = -56.7); ...".
std::string poor_fit_text(const FitCheck& check);

}  // namespace pw
