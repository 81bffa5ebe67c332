#pragma once
// The serving planner: for a model, a cluster, some GPUs and a workload, every tp (a power of two inside a
// node, dividing the attention heads) and pp (up to the blocks) whose replicas use all the GPUs, each replica
// serving its round-robin share of the requests (serving/serving_sim.hpp), ranked by what the SLOs let through or
// by output tokens per second.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cost_model.hpp"
#include "serving/serving_metrics.hpp"
#include "serving/serving_sim.hpp"

namespace pw {

// Limits on a percentile of time to first token and time per output token; a request meets them when its
// own times are within both.
struct ServingSlo {
  std::optional<double> ttft_s, tpot_s;
  double percentile = 99;
  bool any() const { return ttft_s || tpot_s; }
};

struct ServingPlan {
  int tp = 1, pp = 1, replicas = 1;  // disaggregated: the decode pool's
  // Data-parallel attention engines of tp GPUs each in a group, the experts over the group's dp_attention x tp
  // GPUs (serving/dp_attention_serving.hpp; replicas: the groups); 1: none.
  int dp_attention = 1;
  int ep() const { return dp_attention > 1 ? dp_attention * tp : 1; }
  // Disaggregated: the prefill pool's (0: one pool serves both, serving/disaggregated_serving.hpp), its replicas
  // groups of prefill_dp_attention data-parallel attention engines where that is above 1.
  int prefill_tp = 0, prefill_pp = 0, prefill_replicas = 0;
  int prefill_dp_attention = 1;
  int prefill_ep() const { return prefill_dp_attention > 1 ? prefill_dp_attention * prefill_tp : 1; }
  bool disaggregated() const { return prefill_tp > 0; }
  ServingMetrics metrics;
  long kv_capacity_tokens = 0;
  long preemptions = 0;
  double slo_share = 1;     // requests meeting the SLOs
  double goodput_rps = 0;   // of them, per second
  bool meets_slo = true;    // the SLO percentile of TTFT and TPOT within the limits
};

struct ServingPlanResult {
  std::vector<ServingPlan> plans;  // best first: those meeting the SLOs, then the others (best effort)
  int considered = 0;
  // Of them, simulated: the rest could not rank among `top` (planner/serving_leaders.hpp). On several threads
  // the count depends on which finished first; the plans do not.
  int simulated = 0;
  std::vector<std::string> skipped;  // "tp 1, pp 1: <why>"
};

// The tp x pp engines of `gpus` GPUs: tp a power of two inside a node dividing the heads, pp up to the blocks,
// tp x pp dividing `gpus` (the rest are replicas).
std::vector<std::pair<int, int>> serving_engine_shapes(const Model& model, const Cluster& cluster, int gpus);

// A plan's figures from its served requests: the metrics, and what the SLOs let through.
void judge_serving(ServingPlan& plan, const ServingResult& served, const ServingSlo& slo);

// BadInput when no configuration fits (naming the closest reason) or the GPUs cannot be split. `disaggregate`:
// also plans with separate prefill and decode pools (planner/disaggregated_plan.hpp). A mixture of experts also
// gets data-parallel attention plans (planner/dp_attention_plan.hpp). `top` 0: every plan. The configurations are
// simulated on up to `threads` threads (0: all cores), with the same result whatever their number. `time_limit_s`
// > 0: the search holds itself to it while it runs (planner/serving_jobs.hpp), BadInput past it.
ServingPlanResult plan_serving(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                               const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                               const ServingSlo& slo, int top, bool disaggregate = false, int threads = 0,
                               double time_limit_s = 0);

}  // namespace pw
