#include "planner/dp_attention_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "planner/serving_plan_estimate.hpp"
#include "serving/dp_attention_serving.hpp"

namespace pw {

std::vector<DpAttentionShape> dp_attention_shapes(const Model& model, const Cluster& cluster, int gpus,
                                                  const ServingEngineFor& engine_for) {
  const TransformerConfig& t = *model.transformer;
  // A command-line setting, the same at every tp.
  const int redundant = engine_for(1, 1).redundant_experts;
  const int node = cluster.ideal ? gpus : cluster.gpus_per_node;
  std::vector<DpAttentionShape> shapes;
  for (int tp = 1; tp <= std::min(node, gpus / 2); tp *= 2) {
    if (t.heads % tp != 0 || gpus % tp != 0) continue;
    for (int dp = 2; dp <= gpus / tp; ++dp) {
      const int group = dp * tp;
      if (gpus % group != 0 || (t.moe->experts + redundant) % group != 0) continue;
      shapes.push_back({tp, dp, gpus / group});
    }
  }
  return shapes;
}

std::vector<ServingJob> dp_attention_jobs(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                                          const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                                          const ServingSlo& slo) {
  std::vector<ServingJob> jobs;
  for (const auto& [tp, dp, groups] : dp_attention_shapes(model, cluster, gpus, engine_for)) {
    const ServingConfig c = engine_for(tp, 1);
    jobs.push_back({fmt::format("tp {} x {} data-parallel attention engines x {} replicas", tp, dp, groups),
                    [&, tp = tp, dp = dp, groups = groups, c] {
                      ServingPlan p;
                      p.tp = tp;
                      p.dp_attention = dp;
                      p.replicas = groups;
                      const ServingResult all =
                          simulate_dp_attention_groups(model, cluster, cost, c, dp, groups, requests);
                      p.kv_capacity_tokens = all.kv_capacity_tokens;
                      judge_serving(p, all, slo);
                      return p;
                    },
                    {},
                    serving_pool_work(model, c, groups * dp, requests),
                    {}});
  }
  return jobs;
}

}  // namespace pw
