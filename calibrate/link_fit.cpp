#include "calibrate/link_fit.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"
#include "profiler/link_line.hpp"

namespace pw {

std::optional<LinkFit> fit_link_samples(const std::vector<LinkSample>& samples, const std::string& what,
                                        std::vector<std::string>& warnings) {
  const int sizes = link_sample_sizes(samples);
  if (sizes < 2) {
    warnings.push_back(fmt::format("{}: samples at {} message size{}; a link fit needs 2 or more, so transfers use the "
                                   "cluster's link",
                                   what, sizes, sizes == 1 ? "" : "s"));
    return std::nullopt;
  }
  const LinkLine line = fit_link_line(samples);
  if (line.bandwidth_bounded) {
    warnings.push_back(fmt::format("{}: the time does not grow with the message size, so there is no bandwidth to fit; "
                                   "transfers use the cluster's link",
                                   what));
    return std::nullopt;
  }
  LinkFit f;
  f.latency_s = line.latency_s;
  f.bandwidth_bytes_per_s = 1.0 / line.s_per_byte;
  for (const LinkSample& s : samples)
    f.residuals.push_back({format_bytes(s.bytes), s.time_s, f.latency_s + s.bytes / f.bandwidth_bytes_per_s});
  f.quality = fit_quality(f.residuals);
  return f;
}

LinkFits fit_links(const std::vector<LinkProfile>& links, const std::string& source, std::vector<std::string>& warnings) {
  LinkFits out;
  if (links.empty()) {
    warnings.push_back(fmt::format("{}: no link samples; transfers use the cluster's links", source));
    return out;
  }
  std::vector<LinkSample> all;
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkProfile& l = links[i];
    all.insert(all.end(), l.samples.begin(), l.samples.end());
    if (links.size() == 1) continue;  // the pooled fit is this pair's
    std::vector<std::string> ignored;  // a pair without a fit is reported through the pooled one
    if (auto f = fit_link_samples(l.samples, fmt::format("{}: links[{}]", source, i), ignored)) {
      f->src = l.src;
      f->dst = l.dst;
      out.pairs.push_back(*f);
    }
  }
  out.pooled = fit_link_samples(all, fmt::format("{}: links", source), warnings);
  if (out.pooled && links.size() == 1) {
    LinkFit pair = *out.pooled;
    pair.src = links.front().src;
    pair.dst = links.front().dst;
    out.pairs.push_back(pair);
  }
  return out;
}

double ring_steps(CollectiveKind kind, int ranks) {
  const double steps = ranks - 1;
  return kind == CollectiveKind::AllReduce ? 2 * steps : steps;
}

double ring_traffic(CollectiveKind kind, int ranks) {
  const double n = ranks;
  const double one_pass = (n - 1) / n;
  return kind == CollectiveKind::AllReduce ? 2 * one_pass : one_pass;
}

std::vector<CollectiveFit> fit_collectives(const std::vector<CollectiveSample>& samples, std::vector<std::string>& warnings) {
  std::vector<CollectiveFit> out;
  for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter}) {
    std::vector<const CollectiveSample*> these;
    for (const CollectiveSample& s : samples) {
      if (s.kind != kind) continue;
      if (s.ranks < 2 || !(s.bytes > 0) || !(s.time_s > 0) || !std::isfinite(s.time_s) || !(s.link.bandwidth_bytes_per_s > 0))
        throw_bad_input("collective {} sample over {} ranks of {} B in {} s on a {} B/s link: needs ranks >= 2, bytes "
                        "> 0, a positive finite time and a link bandwidth",
                        collective_name(kind), s.ranks, s.bytes, s.time_s, s.link.bandwidth_bytes_per_s);
      these.push_back(&s);
    }
    if (these.empty()) continue;
    // time - steps x latency = (traffic x bytes / link bandwidth) / efficiency: one coefficient, 1 / efficiency.
    const auto n = static_cast<Eigen::Index>(these.size());
    Eigen::MatrixXd X(n, 1);
    Eigen::VectorXd y(n), total(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const CollectiveSample& s = *these[static_cast<size_t>(i)];
      total(i) = s.time_s;
      X(i, 0) = ring_traffic(kind, s.ranks) * s.bytes / s.link.bandwidth_bytes_per_s;
      y(i) = s.time_s - ring_steps(kind, s.ranks) * s.link.latency_s;
    }
    const Eigen::VectorXd c = fit_non_negative(X, y, total);
    if (!(c(0) > 0)) {
      warnings.push_back(fmt::format("collectives: {} times are all within the link latency; no efficiency fitted",
                                     collective_name(kind)));
      continue;
    }
    CollectiveFit f;
    f.kind = kind;
    f.efficiency = 1.0 / c(0);
    if (f.efficiency > 1)
      warnings.push_back(fmt::format("collectives: {} reaches {:.2f} of the link bandwidth (more than the link); check "
                                     "the link the samples name",
                                     collective_name(kind), f.efficiency));
    for (const CollectiveSample* s : these)
      f.residuals.push_back({fmt::format("{} ranks {}", s->ranks, format_bytes(s->bytes)), s->time_s,
                             ring_steps(kind, s->ranks) * s->link.latency_s +
                                 ring_traffic(kind, s->ranks) * s->bytes / (f.efficiency * s->link.bandwidth_bytes_per_s)});
    f.quality = fit_quality(f.residuals);
    out.push_back(f);
  }
  return out;
}

}  // namespace pw
