#pragma once
// The values that stand for "none" in seconds and figures: a time that cannot be reached (an infeasible
// split, a stage that never fits) and a figure that was not measured. One definition, so that every file
// compares against the same one.
#include <limits>

namespace pw {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace pw
