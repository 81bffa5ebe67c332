#include "profiler/cuda/host/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllReduce: return "all_reduce";
    case CollectiveOp::AllGather: return "all_gather";
    case CollectiveOp::ReduceScatter: return "reduce_scatter";
    case CollectiveOp::AllToAll: return "alltoall";
    case CollectiveOp::Broadcast: return "broadcast";
    case CollectiveOp::Reduce: return "reduce";
    case CollectiveOp::SendRecv: return "sendrecv";
  }
  return "?";
}

double bus_factor(CollectiveOp op, int n) {
  if (n < 1) throw_bad_input("collective: a group needs at least 1 rank, got {}", n);
  const double ranks = n;
  switch (op) {
    case CollectiveOp::AllReduce: return 2 * (ranks - 1) / ranks;
    case CollectiveOp::AllGather:
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllToAll: return (ranks - 1) / ranks;
    case CollectiveOp::Broadcast:
    case CollectiveOp::Reduce:
    case CollectiveOp::SendRecv: return 1;
  }
  return 1;
}

BandwidthSample bandwidth_sample(CollectiveOp op, int ranks, double bytes, double time_s) {
  BandwidthSample s;
  s.op = op;
  s.ranks = ranks;
  s.bytes = bytes;
  s.time_s = time_s;
  s.algbw_gb_s = time_s > 0 ? bytes / 1e9 / time_s : 0;
  s.busbw_gb_s = s.algbw_gb_s * bus_factor(op, ranks);
  return s;
}

namespace {
bool per_rank_share(CollectiveOp op) {
  return op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter || op == CollectiveOp::AllToAll;
}
}  // namespace

long nccl_count(CollectiveOp op, double bytes, int ranks, int element_bytes) {
  const long elements = static_cast<long>(bytes / element_bytes);
  return per_rank_share(op) ? elements / ranks : elements;
}

double round_to_ranks(CollectiveOp op, double bytes, int ranks, int element_bytes) {
  const long unit = per_rank_share(op) ? static_cast<long>(ranks) * element_bytes : element_bytes;
  const long whole = std::max(1L, static_cast<long>(bytes) / unit);
  return static_cast<double>(whole * unit);
}

std::vector<double> geometric_sizes(double begin, double end, double factor) {
  if (!(begin >= 1)) throw_bad_input("--min-bytes: must be at least 1, got {}", begin);
  if (!(end >= begin)) throw_bad_input("--max-bytes: must be at least --min-bytes ({}), got {}", begin, end);
  if (!(factor > 1)) throw_bad_input("size factor: must be above 1, got {}", factor);
  std::vector<double> sizes;
  // The tolerance keeps `end` itself when repeated multiplication lands a hair above it.
  for (double s = begin; s <= end * (1 + 1e-12); s *= factor) sizes.push_back(std::round(s));
  return sizes;
}

namespace {
void check_sizes(int tp, int dp, int pp) {
  if (tp < 1) throw_bad_input("--tp: must be at least 1, got {}", tp);
  if (dp < 1) throw_bad_input("--dp: must be at least 1, got {}", dp);
  if (pp < 1) throw_bad_input("--pp: must be at least 1, got {}", pp);
}
}  // namespace

std::vector<std::vector<int>> tp_groups(int tp, int dp, int pp) {
  check_sizes(tp, dp, pp);
  std::vector<std::vector<int>> groups;
  for (int p = 0; p < pp; ++p)
    for (int d = 0; d < dp; ++d) {
      std::vector<int> g;
      for (int t = 0; t < tp; ++t) g.push_back((p * dp + d) * tp + t);
      groups.push_back(std::move(g));
    }
  return groups;
}

std::vector<std::vector<int>> dp_groups(int tp, int dp, int pp) {
  check_sizes(tp, dp, pp);
  std::vector<std::vector<int>> groups;
  for (int p = 0; p < pp; ++p)
    for (int t = 0; t < tp; ++t) {
      std::vector<int> g;
      for (int d = 0; d < dp; ++d) g.push_back((p * dp + d) * tp + t);
      groups.push_back(std::move(g));
    }
  return groups;
}

LinkMatrix link_matrix(const std::vector<LinkProfile>& links, int gpus) {
  if (gpus < 1) throw_bad_input("link matrix: needs at least 1 GPU, got {}", gpus);
  LinkMatrix m;
  m.gpus = gpus;
  m.links.assign(static_cast<size_t>(gpus) * gpus, LinkSpec{});
  const auto find = [&](int a, int b) -> const LinkProfile* {
    for (const LinkProfile& l : links)
      if (l.src == a && l.dst == b) return &l;
    return nullptr;
  };
  for (int a = 0; a < gpus; ++a)
    for (int b = 0; b < gpus; ++b) {
      if (a == b) continue;
      const LinkProfile* l = find(a, b);
      if (!l) l = find(b, a);
      if (!l) throw_bad_input("link matrix: no measured link between GPU {} and GPU {}; measure every pair", a, b);
      m.links[static_cast<size_t>(a) * gpus + b] = LinkSpec{l->bandwidth_bytes_per_s, l->latency_s};
    }
  return m;
}

LinkSpec group_link(const std::vector<int>& gpus, const std::vector<LinkProfile>& links) {
  LinkSpec slowest{std::numeric_limits<double>::infinity(), 0};
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      const int a = gpus[i], b = gpus[j];
      const auto it = std::find_if(links.begin(), links.end(), [&](const LinkProfile& l) {
        return (l.src == a && l.dst == b) || (l.src == b && l.dst == a);
      });
      if (it == links.end())
        throw_bad_input("collective group: no measured link between GPU {} and GPU {}; measure every pair", a, b);
      slowest.bandwidth_bytes_per_s = std::min(slowest.bandwidth_bytes_per_s, it->bandwidth_bytes_per_s);
      slowest.latency_s = std::max(slowest.latency_s, it->latency_s);
    }
  return slowest;
}

CollectiveProfile collective_profile(const BandwidthSample& sample, const LinkSpec& group_link) {
  CollectiveProfile c;
  switch (sample.op) {
    case CollectiveOp::AllReduce: c.kind = CollectiveKind::AllReduce; break;
    case CollectiveOp::AllGather: c.kind = CollectiveKind::AllGather; break;
    case CollectiveOp::ReduceScatter: c.kind = CollectiveKind::ReduceScatter; break;
    default:
      throw_bad_input("collective {}: the profile keeps all_reduce, all_gather and reduce_scatter only", to_string(sample.op));
  }
  c.ranks = sample.ranks;
  c.bytes = sample.bytes;
  c.time_s = sample.time_s;
  c.link = group_link;
  return c;
}

double overlap_slowdown(double alone_s, double with_traffic_s) {
  return alone_s > 0 ? with_traffic_s / alone_s - 1 : 0;
}

std::string nccl_tests_table(const std::vector<BandwidthSample>& samples, const std::string& type, int element_bytes,
                             const std::string& group) {
  if (samples.empty()) return "";
  const BandwidthSample& first = samples.front();
  const bool reduces = first.op == CollectiveOp::AllReduce || first.op == CollectiveOp::ReduceScatter ||
                       first.op == CollectiveOp::Reduce;
  std::string out = fmt::format("# {} over {} ({} ranks; time: median, algbw = size / time, busbw = algbw x {:.4g})\n",
                                to_string(first.op), group, first.ranks, bus_factor(first.op, first.ranks));
  out += fmt::format("# {:>10} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8}\n", "size (B)", "count", "type", "redop",
                     "time (us)", "algbw", "busbw");
  for (const BandwidthSample& s : samples)
    out += fmt::format("  {:>10.0f} {:>12} {:>6} {:>6} {:>10.2f} {:>8.2f} {:>8.2f}\n", s.bytes,
                       static_cast<long>(s.bytes / element_bytes), type, reduces ? "sum" : "none", s.time_s * 1e6,
                       s.algbw_gb_s, s.busbw_gb_s);
  return out;
}

}  // namespace pw
