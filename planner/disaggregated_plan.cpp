#include "planner/disaggregated_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "planner/parallel_for.hpp"
#include "planner/serving_plan_estimate.hpp"
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

std::vector<ServingJob> disaggregated_jobs(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                                           const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                                           const ServingSlo& slo, int threads) {
  struct Prefill {
    int tp = 1, pp = 1, decode_gpus = 0;
    ServingPool pool;
    std::optional<ServingResult> served;
    std::string why;  // BadInput's message where it cannot serve
  };
  std::vector<std::shared_ptr<Prefill>> prefills;  // shared with the jobs that outlive this call
  for (int prefill_gpus : prefill_pool_sizes(gpus))
    for (const auto& [ptp, ppp] : serving_engine_shapes(model, cluster, prefill_gpus))
      prefills.push_back(std::make_shared<Prefill>(Prefill{ptp, ppp, gpus - prefill_gpus, pool_of(engine_for, ptp, ppp, prefill_gpus), {}, {}}));
  // Each prefill pool once, all on the threads; then each with every decode pool of the rest.
  parallel_for(threads, prefills.size(), [&](size_t i) {
    try {
      prefills[i]->served = simulate_prefill_pool(model, cluster, cost, prefills[i]->pool, requests);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      prefills[i]->why = e.what();
    }
  });
  std::vector<ServingJob> jobs;
  for (const std::shared_ptr<Prefill>& shared : prefills) {
    const Prefill& prefill = *shared;
    const std::string pool = fmt::format("prefill pool tp {}, pp {} x {}", prefill.tp, prefill.pp, prefill.pool.replicas);
    if (!prefill.served) {
      jobs.push_back({pool, {}, {}, 0, prefill.why});
      continue;
    }
    for (const auto& [dtp, dpp] : serving_engine_shapes(model, cluster, prefill.decode_gpus)) {
      const ServingPool decode = pool_of(engine_for, dtp, dpp, prefill.decode_gpus);
      jobs.push_back({fmt::format("{}, decode pool tp {}, pp {} x {}", pool, dtp, dpp, decode.replicas),
                      [&, shared, decode, dtp = dtp, dpp = dpp] {
                        const Prefill& prefill = *shared;
                        const DisaggregatedResult r =
                            simulate_decode_pool(model, cluster, cost, prefill.pool, *prefill.served, decode, requests);
                        ServingPlan p;
                        p.tp = dtp;
                        p.pp = dpp;
                        p.replicas = decode.replicas;
                        p.prefill_tp = prefill.tp;
                        p.prefill_pp = prefill.pp;
                        p.prefill_replicas = prefill.pool.replicas;
                        p.kv_capacity_tokens = r.decode.kv_capacity_tokens;
                        judge_serving(p, r.served, slo);
                        return p;
                      },
                      [&, shared, decode] {
                        return decode_pool_floor(model, cluster, cost, shared->pool, *shared->served, decode, requests);
                      },
                      serving_pool_work(model, decode.engine, decode.replicas, requests),
                      {}});
    }
  }
  return jobs;
}

}  // namespace pw
