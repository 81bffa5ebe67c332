#pragma once
// The one fit of time = latency + bytes / bandwidth to a link's message-size samples, which the profiler
// writes into a profile and the calibration reports per pair: both read the same samples the same way.
#include <vector>

#include "profiler/profile.hpp"

namespace pw {

struct LinkLine {
  double latency_s = 0;
  double s_per_byte = 0;  // 1 / bandwidth
  // The time did not grow with the size: latency_s is the mean time and 1 / s_per_byte the largest
  // message's bytes over its time, a lower bound on the bandwidth, not a fit.
  bool bandwidth_bounded = false;
};

// Distinct message sizes among the samples.
int link_sample_sizes(const std::vector<LinkSample>& samples);

// Least squares on relative error (each sample weighted by 1 / time^2, so small and large messages count
// alike) with latency >= 0. Where that slope is not positive (small messages' times all noise), plain
// least squares, which the large messages decide. Where the time does not grow with the size at all:
// bandwidth_bounded. BadInput with fewer than 2 sizes.
LinkLine fit_link_line(const std::vector<LinkSample>& samples);

// The fit written into `link` (latency, bandwidth, bandwidth_bounded).
void fit_link(LinkProfile& link);

}  // namespace pw
