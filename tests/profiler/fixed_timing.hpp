#pragma once
// A phase timed once at exactly `s`: median, p10 and p90 all `s`.
#include "profiler/profile.hpp"

inline pw::PhaseTiming fixed(double s) { return pw::PhaseTiming{s, s, s, 1}; }
