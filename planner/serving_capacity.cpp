#include "planner/serving_capacity.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "serving/disaggregated_serving.hpp"
#include "serving/dp_attention_serving.hpp"
#include "serving/serving_replicas.hpp"

namespace pw {

double highest_rate(const std::function<bool(double)>& meets, double low, double high, double relative) {
  if (!(low > 0 && high > low && relative > 0 && relative < 1))
    throw_runtime("highest_rate: needs 0 < low < high and 0 < relative < 1, got {}, {} and {}", low, high, relative);
  if (!meets(low)) return 0;
  if (meets(high)) return high;
  // meets(low) and not meets(high): halve the ratio between them until it is within `relative`.
  while (high / low > 1 + relative) {
    const double mid = std::sqrt(low * high);
    (meets(mid) ? low : high) = mid;
  }
  return low;
}

ServingPlan evaluate_plan(const Model& model, const Cluster& cluster, const CostModel& cost,
                          const ServingEngineFor& engine_for, const ServingPlan& plan,
                          const std::vector<ServingRequest>& requests, const ServingSlo& slo) {
  ServingPlan p = plan;
  ServingResult served;
  if (plan.disaggregated()) {
    const ServingPool prefill{engine_for(plan.prefill_tp, plan.prefill_pp), plan.prefill_replicas, plan.prefill_dp_attention};
    const ServingPool decode{engine_for(plan.tp, plan.pp), plan.replicas, plan.dp_attention};
    const DisaggregatedResult r = simulate_disaggregated(model, cluster, cost, prefill, decode, requests);
    served = r.served;
    p.kv_capacity_tokens = r.decode.kv_capacity_tokens;
  } else if (plan.dp_attention > 1) {
    served = simulate_dp_attention_groups(model, cluster, cost, engine_for(plan.tp, 1), plan.dp_attention, plan.replicas,
                                          requests);
    p.kv_capacity_tokens = served.kv_capacity_tokens;
  } else {
    served = simulate_replicas(model, cluster, cost, engine_for(plan.tp, plan.pp), plan.replicas, requests);
    p.kv_capacity_tokens = served.kv_capacity_tokens;
  }
  judge_serving(p, served, slo);
  return p;
}

double max_serving_rate(const Model& model, const Cluster& cluster, const CostModel& cost,
                        const ServingEngineFor& engine_for, const ServingPlan& plan,
                        const std::function<std::vector<ServingRequest>(double rate)>& requests_at, const ServingSlo& slo) {
  if (!slo.any()) throw_bad_input("--max-rate: give --ttft-slo or --tpot-slo, the limits the rate must keep");
  // Every request at once is the limit of ever faster arrivals: meeting the SLOs then, it meets them at any rate.
  const ServingPlan burst = evaluate_plan(model, cluster, cost, engine_for, plan, requests_at(0), slo);
  if (burst.meets_slo) return kUnboundedRate;
  const double saturated = burst.metrics.requests_per_s;
  if (!(saturated > 0)) return 0;
  const auto meets = [&](double rate) {
    return evaluate_plan(model, cluster, cost, engine_for, plan, requests_at(rate), slo).meets_slo;
  };
  // A finite workload's arrivals can outrun the burst's rate for a while: double past it until the SLOs fail
  // (they must, nearing the burst).
  double high = saturated;
  for (int i = 0; i < 40 && meets(high); ++i) high *= 2;
  return highest_rate(meets, saturated / 1000, high, 0.005);
}

}  // namespace pw
