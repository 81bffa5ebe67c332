#include "profiler/link_line.hpp"

#include <algorithm>
#include <set>

#include "core/error.hpp"

namespace pw {
namespace {

// Least squares of t = a + b x with each sample weighted by `weight(time)`; a kept >= 0 (through the origin
// when the free intercept would be negative).
template <typename Weight>
LinkLine weighted_line(const std::vector<LinkSample>& samples, Weight weight) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const LinkSample& s : samples) {
    const double w = weight(s.time_s);
    sw += w;
    sx += w * s.bytes;
    sy += w * s.time_s;
    sxx += w * s.bytes * s.bytes;
    sxy += w * s.bytes * s.time_s;
  }
  const double det = sw * sxx - sx * sx;
  LinkLine f;
  f.s_per_byte = det != 0 ? (sw * sxy - sx * sy) / det : 0;
  f.latency_s = sw != 0 ? (sy - f.s_per_byte * sx) / sw : 0;
  if (f.latency_s < 0) {
    f.latency_s = 0;
    f.s_per_byte = sxx > 0 ? sxy / sxx : 0;
  }
  return f;
}

}  // namespace

int link_sample_sizes(const std::vector<LinkSample>& samples) {
  std::set<double> sizes;
  for (const LinkSample& s : samples) sizes.insert(s.bytes);
  return static_cast<int>(sizes.size());
}

LinkLine fit_link_line(const std::vector<LinkSample>& samples) {
  const int sizes = link_sample_sizes(samples);
  if (sizes < 2) throw_bad_input("link fit: needs samples at 2 message sizes or more, got {}", sizes);
  LinkLine f = weighted_line(samples, [](double t) { return 1.0 / std::max(t * t, 1e-30); });
  // Relative weights let the small messages decide the slope, and where their times are mostly scheduling
  // noise (one repetition on a busy machine) it can come out flat or falling: the large messages, whose
  // times the bytes dominate, then decide it.
  if (!(f.s_per_byte > 0)) f = weighted_line(samples, [](double) { return 1.0; });
  f.bandwidth_bounded = !(f.s_per_byte > 0);
  if (f.bandwidth_bounded) {
    // No size term shows above the noise: least squares with both terms >= 0 keeps the mean time as the
    // latency, and the bandwidth is the lowest the largest message allows (its bytes over its whole time).
    const LinkSample& largest = *std::max_element(samples.begin(), samples.end(),
                                                  [](const LinkSample& a, const LinkSample& b) { return a.bytes < b.bytes; });
    f.latency_s = 0;
    for (const LinkSample& s : samples) f.latency_s += s.time_s / static_cast<double>(samples.size());
    f.s_per_byte = largest.time_s / largest.bytes;
  }
  return f;
}

void fit_link(LinkProfile& link) {
  const LinkLine f = fit_link_line(link.samples);
  link.latency_s = f.latency_s;
  link.bandwidth_bytes_per_s = 1.0 / f.s_per_byte;
  link.bandwidth_bounded = f.bandwidth_bounded;
}

}  // namespace pw
