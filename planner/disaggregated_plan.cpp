#include "planner/disaggregated_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "serving/disaggregated_serving.hpp"

namespace pw {
namespace {

ServingPool pool_of(const ServingEngineFor& engine_for, int tp, int pp, int gpus) {
  ServingPool p;
  p.engine = engine_for(tp, pp);
  p.replicas = gpus / (tp * pp);
  return p;
}

}  // namespace

std::vector<int> prefill_pool_sizes(int gpus) {
  std::vector<int> sizes;
  for (int quarter : {1, 2, 3})
    if (gpus * quarter % 4 == 0 && gpus * quarter / 4 >= 1) sizes.push_back(gpus * quarter / 4);
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

void add_disaggregated_plans(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                             const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                             const ServingSlo& slo, ServingPlanResult& out) {
  for (int prefill_gpus : prefill_pool_sizes(gpus)) {
    const int decode_gpus = gpus - prefill_gpus;
    for (const auto& [ptp, ppp] : serving_engine_shapes(model, cluster, prefill_gpus)) {
      const ServingPool prefill = pool_of(engine_for, ptp, ppp, prefill_gpus);
      ServingResult prefilled;
      try {
        prefilled = simulate_prefill_pool(model, cluster, cost, prefill, requests);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::BadInput) throw;
        out.skipped.push_back(fmt::format("prefill pool tp {}, pp {} x {}: {}", ptp, ppp, prefill.replicas, e.what()));
        continue;
      }
      for (const auto& [dtp, dpp] : serving_engine_shapes(model, cluster, decode_gpus)) {
        ++out.considered;
        const ServingPool decode = pool_of(engine_for, dtp, dpp, decode_gpus);
        try {
          const DisaggregatedResult r = simulate_decode_pool(model, cluster, cost, prefill, prefilled, decode, requests);
          ServingPlan p;
          p.tp = dtp;
          p.pp = dpp;
          p.replicas = decode.replicas;
          p.prefill_tp = ptp;
          p.prefill_pp = ppp;
          p.prefill_replicas = prefill.replicas;
          p.kv_capacity_tokens = r.decode.kv_capacity_tokens;
          judge_serving(p, r.served, slo);
          out.plans.push_back(p);
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::BadInput) throw;
          out.skipped.push_back(fmt::format("prefill pool tp {}, pp {} x {}, decode pool tp {}, pp {} x {}: {}", ptp, ppp,
                                            prefill.replicas, dtp, dpp, decode.replicas, e.what()));
        }
      }
    }
  }
}

}  // namespace pw
