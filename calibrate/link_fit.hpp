#pragma once
// Link fits: time = latency + bytes / bandwidth per measured pair and over all pairs pooled, from a
// profile's message-size sweeps; collective efficiency (bus bandwidth over link bandwidth) per kind from
// measured collectives.
#include <optional>
#include <string>
#include <vector>

#include "calibrate/calibration.hpp"
#include "profiler/profile.hpp"

namespace pw {

// The profiler's fit (fit_link_line) over `samples`, with residuals; nullopt (and a warning naming `what`) when fewer
// than two sizes were measured or the time does not grow with the size.
std::optional<LinkFit> fit_link_samples(const std::vector<LinkSample>& samples, const std::string& what,
                                        std::vector<std::string>& warnings);

struct LinkFits {
  std::optional<LinkFit> pooled;
  std::vector<LinkFit> pairs;
};
LinkFits fit_links(const std::vector<LinkProfile>& links, const std::string& source, std::vector<std::string>& warnings);

// The ring's latency steps and traffic factor of one collective over n ranks (docs/cost-model.md).
double ring_steps(CollectiveKind kind, int ranks);
double ring_traffic(CollectiveKind kind, int ranks);

// One efficiency per kind present in `samples`. BadInput for a sample with ranks < 2, no bytes, a time
// that is not positive or a link without bandwidth.
std::vector<CollectiveFit> fit_collectives(const std::vector<CollectiveSample>& samples, std::vector<std::string>& warnings);

}  // namespace pw
