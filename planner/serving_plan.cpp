#include "planner/serving_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "core/error.hpp"
#include "planner/disaggregated_plan.hpp"
#include "planner/dp_attention_plan.hpp"
#include "planner/serving_jobs.hpp"
#include "planner/serving_plan_estimate.hpp"
#include "serving/serving_replicas.hpp"

namespace pw {
namespace {

ServingPlan evaluate_serving(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingConfig& engine,
                             int replicas, const std::vector<ServingRequest>& requests, const ServingSlo& slo) {
  ServingPlan p;
  p.tp = engine.tp;
  p.pp = engine.pp;
  p.replicas = replicas;
  const ServingResult all = simulate_replicas(model, cluster, cost, engine, replicas, requests);
  p.kv_capacity_tokens = all.kv_capacity_tokens;
  judge_serving(p, all, slo);
  return p;
}

}  // namespace

std::vector<std::pair<int, int>> serving_engine_shapes(const Model& model, const Cluster& cluster, int gpus) {
  const TransformerConfig& t = *model.transformer;
  const int node = cluster.ideal ? gpus : cluster.gpus_per_node;
  std::vector<std::pair<int, int>> shapes;
  for (int tp = 1; tp <= std::min(node, gpus); tp *= 2) {
    if (t.heads % tp != 0 || gpus % tp != 0) continue;
    for (int pp = 1; pp <= std::min(t.layers, gpus / tp); ++pp)
      if (gpus % (tp * pp) == 0) shapes.emplace_back(tp, pp);
  }
  return shapes;
}

void judge_serving(ServingPlan& p, const ServingResult& all, const ServingSlo& slo) {
  p.metrics = serving_metrics(all);
  p.preemptions = all.preemptions;
  long ok = 0;
  std::vector<double> ttft, tpot;
  for (const ServedRequest& q : all.requests) {
    const double first = q.first_token_s - q.arrival_s;
    const double per = q.output_tokens > 1 ? (q.last_token_s - q.first_token_s) / static_cast<double>(q.output_tokens - 1) : 0;
    ttft.push_back(first);
    if (q.output_tokens > 1) tpot.push_back(per);
    if ((!slo.ttft_s || first <= *slo.ttft_s) && (!slo.tpot_s || per <= *slo.tpot_s)) ++ok;
  }
  p.slo_share = all.requests.empty() ? 0 : static_cast<double>(ok) / static_cast<double>(all.requests.size());
  p.goodput_rps = all.makespan_s > 0 ? static_cast<double>(ok) / all.makespan_s : 0;
  p.meets_slo = (!slo.ttft_s || percentile_of(ttft, slo.percentile) <= *slo.ttft_s) &&
                (!slo.tpot_s || percentile_of(tpot, slo.percentile) <= *slo.tpot_s);
}

ServingPlanResult plan_serving(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                               const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                               const ServingSlo& slo, int top, bool disaggregate, int threads, double time_limit_s) {
  if (gpus < 1) throw_bad_input("--gpus: must be at least 1, got {}", gpus);
  cluster.check_capacity(gpus);
  ServingPlanResult out;
  const bool by_slo = slo.any();
  ServingLeaders leaders(top, slo, requests);
  const ServingTimeLimit limit{time_limit_s};
  std::vector<ServingJob> jobs;
  for (const auto& [tp, pp] : serving_engine_shapes(model, cluster, gpus)) {
    const ServingConfig c = engine_for(tp, pp);
    const int replicas = gpus / (tp * pp);
    jobs.push_back({fmt::format("tp {}, pp {}", tp, pp),
                    [&, c, replicas] { return evaluate_serving(model, cluster, cost, c, replicas, requests, slo); },
                    [&, c] { return serving_floor(model, cluster, cost, c, requests); },
                    serving_pool_work(model, c, replicas, requests),
                    {}});
  }
  auto append = [&jobs](std::vector<ServingJob> more) { std::move(more.begin(), more.end(), std::back_inserter(jobs)); };
  if (model.transformer->moe) append(dp_attention_jobs(model, cluster, cost, gpus, engine_for, requests, slo));
  if (disaggregate) append(disaggregated_jobs(model, cluster, cost, gpus, engine_for, requests, slo, threads));
  run_serving_jobs(jobs, threads, leaders, out, limit);
  if (out.plans.empty()) {
    if (out.skipped.empty()) throw_bad_input("--gpus: {} GPUs split into no tp x pp x replicas for '{}'", gpus, model.name);
    throw_bad_input("no configuration of {} GPUs serves the workload; the last tried, {}", gpus, out.skipped.back());
  }
  std::stable_sort(out.plans.begin(), out.plans.end(),
                   [&](const ServingPlan& a, const ServingPlan& b) { return serving_plan_before(a, b, by_slo); });
  if (top > 0 && static_cast<int>(out.plans.size()) > top) out.plans.resize(static_cast<size_t>(top));
  return out;
}

}  // namespace pw
