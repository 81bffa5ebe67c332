#pragma once
// Where each (tp, pp, dp) rank runs: the global GPU index of every rank of a parallel configuration
// under a rank order, the node and local GPU that index falls on, and the choice between the standard
// orders by the traffic each sends across the cluster's slower links.
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/rank_order.hpp"
#include "core/stage_costs.hpp"
#include "core/workload.hpp"
#include "schedules/ir.hpp"

namespace pw {

struct GpuPlace {
  int global_rank = 0;
  int node = 0;
  int local_gpu = 0;  // index inside the node
  int tp_idx = 0;
  int cp_idx = 0;
  int pp_idx = 0;
  int dp_idx = 0;
  // Its place in the experts' fold (core/expert_parallel.hpp): etp rank, ep rank, expert-data-parallel rank.
  int etp_idx = 0;
  int ep_idx = 0;
  int expert_dp_idx = 0;
};

// Every GPU of the configuration, by global rank. Throws BadInput when the cluster cannot hold the
// configuration (a fixed node count too small) or a tp group would straddle two nodes (tp must divide
// gpus_per_node).
std::vector<GpuPlace> place_ranks(const ParallelConfig& pc, const Cluster& cluster,
                                  RankOrder order = RankOrder::TpPpDp);

// One line per GPU: "rank 12 -> node 1 gpu 4 (tp 0, pp 1, dp 1)"; with context parallelism (a place with
// cp_idx > 0) "(tp 0, cp 1, pp 1, dp 1)" on every line; with expert parallelism its ep rank after
// ("(tp 0, pp 1, dp 1; ep 3)").
std::string placement_to_text(const std::vector<GpuPlace>& places);

// Traffic of one iteration, per tp rank (each of the tp x cp ranks of a stage moves its own shard).
struct RankTransfer {
  int from_rank = 0;  // pipeline ranks
  int to_rank = 0;
  double bytes_per_microbatch = 0;  // the activation; its gradient, of the same size, comes back
};
struct PipelineTraffic {
  std::vector<RankTransfer> p2p;  // one per stage boundary between two ranks
  int microbatches = 1;
  // Bytes of gradients each pipeline rank reduces over its dp peers once per iteration; size pp.
  std::vector<double> dp_gradient_bytes;
};

// The traffic of a split: every boundary between stages on different ranks carries the stage's
// output_bytes; each rank reduces gradients of `gradient_bytes_per_parameter` (fp32: 4) for the
// parameters of all its stages.
PipelineTraffic pipeline_traffic(const std::vector<StageCost>& stages, const Placement& placement, int microbatches,
                                 double gradient_bytes_per_parameter = 4);

// What an order costs: the seconds the iteration's transfers occupy their links, summed (each p2p
// message: bytes / bandwidth of its path; each dp ring: its per-hop bytes / bandwidth on every hop).
// Transfers between GPUs of one node ride NVLink; the sum is dominated by what crosses nodes.
struct OrderCost {
  RankOrder order = RankOrder::TpPpDp;
  double p2p_link_s = 0;
  double dp_link_s = 0;
  double total_s() const { return p2p_link_s + dp_link_s; }
};
OrderCost rank_order_cost(const ParallelConfig& pc, const Cluster& cluster, const PipelineTraffic& traffic,
                          RankOrder order);

// The standard order whose transfers spend the least time on links (ties: the default tp-pp-dp).
// Throws BadInput as place_ranks() does.
RankOrder choose_rank_order(const ParallelConfig& pc, const Cluster& cluster, const PipelineTraffic& traffic);

}  // namespace pw
