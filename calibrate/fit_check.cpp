#include "calibrate/fit_check.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "calibrate/calibration.hpp"

namespace pw {

double median_abs_error_pct(const std::vector<HeldOutPoint>& points, double HeldOutPoint::*predicted) {
  std::vector<double> errors;
  for (const HeldOutPoint& p : points)
    if (std::isfinite(p.*predicted) && p.measured_s > 0) errors.push_back(std::abs(p.*predicted - p.measured_s) / p.measured_s * 100);
  if (errors.empty()) return std::nan("");
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  return n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
}

FitCheck check_fit(const Calibration& c, int shared_runs) {
  FitCheck check;
  check.runs = static_cast<int>(c.runs.size());
  check.shared_runs = shared_runs;
  check.step_r2 = c.overheads.fitted ? c.overheads.step_quality.r2 : std::nan("");
  check.held_out_error_pct = median_abs_error_pct(c.held_out_runs, &HeldOutPoint::calibrated_s);
  check.profile_held_out_error_pct = median_abs_error_pct(c.held_out_runs, &HeldOutPoint::profiled_s);
  if (check.step_r2 < 0)
    check.problems.push_back(
        fmt::format("the run fit predicts the step times worse than their mean does (step-time R^2 = {:.1f})",
                    check.step_r2));
  if (check.held_out_error_pct > check.profile_held_out_error_pct + kHeldOutTolerancePct)
    check.problems.push_back(fmt::format("held-out runs are off by {:.1f}% where the profile alone is off by {:.1f}%",
                                         check.held_out_error_pct, check.profile_held_out_error_pct));
  return check;
}

std::string poor_fit_text(const FitCheck& check) {
  std::string text;
  for (const std::string& p : check.problems) text += (text.empty() ? "" : "; ") + p;
  if (check.shared_runs > 0)
    text += fmt::format("; {} of the {} runs were measured on a shared machine (their `run` said so)", check.shared_runs,
                        check.runs);
  return text;
}

}  // namespace pw
