#include "planner/placement.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"

namespace pw {
namespace {

bool tp_fits_nodes(const ParallelConfig& pc, const Cluster& cluster) {
  return cluster.ideal || pc.tp <= 1 || cluster.gpus_per_node % pc.tp == 0;
}

double link_seconds(const Cluster& cluster, int from, int to, double bytes) {
  if (bytes <= 0 || from == to) return 0;
  return bytes / cluster.link(from, to).bandwidth_bytes_per_s;
}

}  // namespace

std::vector<GpuPlace> place_ranks(const ParallelConfig& pc, const Cluster& cluster, RankOrder order) {
  cluster.check_capacity(pc.gpus());
  if (!tp_fits_nodes(pc, cluster))
    throw_bad_input("--tp: {} does not divide the {} GPUs of a node in cluster '{}', so a tp group would span two "
                    "nodes; use a divisor of {}",
                    pc.tp, cluster.gpus_per_node, cluster.name, cluster.gpus_per_node);
  std::vector<GpuPlace> places(static_cast<size_t>(pc.gpus()));
  for (int d = 0; d < pc.dp; ++d)
    for (int p = 0; p < pc.pp; ++p)
      for (int t = 0; t < pc.tp * pc.cp; ++t) {
        const int g = global_rank(pc, order, t, p, d);
        const int folded = t + pc.tp * pc.cp * d;  // tp fastest, then cp, then dp
        places[static_cast<size_t>(g)] = GpuPlace{g,    cluster.node_of(g), g % cluster.gpus_per_node,
                                                  t % pc.tp, t / pc.tp,     p,
                                                  d,    folded % pc.etp,    folded / pc.etp % pc.ep,
                                                  folded / (pc.etp * pc.ep)};
      }
  return places;
}

std::string placement_to_text(const std::vector<GpuPlace>& places) {
  const bool cp = std::any_of(places.begin(), places.end(), [](const GpuPlace& p) { return p.cp_idx > 0; });
  const bool ep = std::any_of(places.begin(), places.end(), [](const GpuPlace& p) { return p.ep_idx > 0 || p.etp_idx > 0; });
  std::string out;
  for (const GpuPlace& p : places)
    out += fmt::format("rank {} -> node {} gpu {} (tp {}{}, pp {}, dp {}{})\n", p.global_rank, p.node, p.local_gpu, p.tp_idx,
                       cp ? fmt::format(", cp {}", p.cp_idx) : "", p.pp_idx, p.dp_idx,
                       ep ? fmt::format("; ep {}, etp {}", p.ep_idx, p.etp_idx) : "");
  return out;
}

PipelineTraffic pipeline_traffic(const std::vector<StageCost>& stages, const Placement& placement, int microbatches,
                                 double gradient_bytes_per_parameter) {
  if (static_cast<int>(stages.size()) != placement.stages())
    throw_runtime("pipeline_traffic: {} stage costs for {} stages", stages.size(), placement.stages());
  PipelineTraffic t;
  t.microbatches = microbatches;
  t.dp_gradient_bytes.assign(static_cast<size_t>(placement.ranks), 0.0);
  for (int s = 0; s < placement.stages(); ++s) {
    const int r = placement.rank_of(s);
    t.dp_gradient_bytes[static_cast<size_t>(r)] += stages[static_cast<size_t>(s)].parameters * gradient_bytes_per_parameter;
    if (s + 1 < placement.stages() && placement.rank_of(s + 1) != r)
      t.p2p.push_back(RankTransfer{r, placement.rank_of(s + 1), stages[static_cast<size_t>(s)].output_bytes});
  }
  return t;
}

OrderCost rank_order_cost(const ParallelConfig& pc, const Cluster& cluster, const PipelineTraffic& traffic,
                          RankOrder order) {
  if (static_cast<int>(traffic.dp_gradient_bytes.size()) != pc.pp)
    throw_runtime("rank_order_cost: gradients of {} ranks, pp = {}", traffic.dp_gradient_bytes.size(), pc.pp);
  OrderCost c;
  c.order = order;
  if (cluster.ideal) return c;
  for (const RankTransfer& x : traffic.p2p) {
    if (x.from_rank < 0 || x.to_rank < 0 || x.from_rank >= pc.pp || x.to_rank >= pc.pp)
      throw_runtime("rank_order_cost: a transfer from rank {} to rank {}, pp = {}", x.from_rank, x.to_rank, pc.pp);
    const double bytes = x.bytes_per_microbatch * traffic.microbatches;
    for (int d = 0; d < pc.dp; ++d)
      for (int t = 0; t < pc.tp * pc.cp; ++t) {
        const int a = global_rank(pc, order, t, x.from_rank, d), b = global_rank(pc, order, t, x.to_rank, d);
        c.p2p_link_s += link_seconds(cluster, a, b, bytes) + link_seconds(cluster, b, a, bytes);
      }
  }
  if (pc.dp > 1) {
    // A ring all-reduce (or reduce-scatter + all-gather) moves 2 (n - 1) / n of the array over each hop.
    const double hop_share = 2.0 * (pc.dp - 1) / pc.dp;
    for (int r = 0; r < pc.pp; ++r)
      for (int t = 0; t < pc.tp * pc.cp; ++t)
        for (int d = 0; d < pc.dp; ++d) {
          const int a = global_rank(pc, order, t, r, d), b = global_rank(pc, order, t, r, (d + 1) % pc.dp);
          c.dp_link_s += link_seconds(cluster, a, b, hop_share * traffic.dp_gradient_bytes[static_cast<size_t>(r)]);
        }
  }
  return c;
}

RankOrder choose_rank_order(const ParallelConfig& pc, const Cluster& cluster, const PipelineTraffic& traffic) {
  cluster.check_capacity(pc.gpus());
  if (!tp_fits_nodes(pc, cluster)) place_ranks(pc, cluster);  // throws the tp message
  RankOrder best = RankOrder::TpPpDp;
  double best_s = rank_order_cost(pc, cluster, traffic, best).total_s();
  for (RankOrder o : rank_orders()) {
    const double s = rank_order_cost(pc, cluster, traffic, o).total_s();
    if (s < best_s) {
      best = o;
      best_s = s;
    }
  }
  return best;
}

}  // namespace pw
