#pragma once
// The validation's error structure as a picture (docs/figures/validation-errors.svg): each published run's
// prediction error against model size, pp, dp, ep and precision, one colour per validation set, with the
// 5% and 15% bands of issue 34's targets. An error that follows one of these axes is a missing mechanism.
#include <string>
#include <vector>

struct ErrorPoint {
  std::string set;        // "A100", "H100 dense", "MoE"
  double parameters = 0;  // the model's, total
  int pp = 1, dp = 1, ep = 1;
  std::string precision;  // "bf16" or "fp8"
  double error = 0;       // predicted / reported - 1
};

// The middle value (the mean of the two middle ones for an even count); the figure's legend and the tests'
// gates use the same one.
double median(std::vector<double> v);

// Deterministic SVG text (fixed decimals), the same points giving the same bytes.
std::string error_figure_svg(const std::vector<ErrorPoint>& points);
