#include "planner/disaggregated_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "planner/dp_attention_plan.hpp"
#include "planner/parallel_for.hpp"
#include "planner/serving_plan_estimate.hpp"
#include "serving/disaggregated_serving.hpp"

namespace pw {
namespace {

// "tp 2, pp 1 x 3", or "tp 1 x 8 data-parallel attention engines x 1".
std::string shape_text(const PoolShape& s) {
  return s.dp > 1 ? fmt::format("tp {} x {} data-parallel attention engines x {}", s.tp, s.dp, s.pool.replicas)
                  : fmt::format("tp {}, pp {} x {}", s.tp, s.pp, s.pool.replicas);
}

}  // namespace

std::vector<PoolShape> pool_shapes(const Model& model, const Cluster& cluster, const ServingEngineFor& engine_for,
                                   int gpus) {
  std::vector<PoolShape> out;
  for (const auto& [tp, pp] : serving_engine_shapes(model, cluster, gpus)) {
    PoolShape s{tp, pp, 1, {}};
    s.pool.engine = engine_for(tp, pp);
    s.pool.replicas = gpus / (tp * pp);
    out.push_back(s);
  }
  if (!model.transformer->moe) return out;
  for (const DpAttentionShape& d : dp_attention_shapes(model, cluster, gpus, engine_for)) {
    PoolShape s{d.tp, 1, d.dp, {}};
    s.pool.engine = engine_for(d.tp, 1);
    s.pool.replicas = d.groups;
    s.pool.dp_attention = d.dp;
    out.push_back(s);
  }
  return out;
}

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
    PoolShape shape;
    int decode_gpus = 0;
    std::optional<ServingResult> served;
    std::string why;  // BadInput's message where it cannot serve
  };
  std::vector<std::shared_ptr<Prefill>> prefills;  // shared with the jobs that outlive this call
  for (int prefill_gpus : prefill_pool_sizes(gpus))
    for (const PoolShape& s : pool_shapes(model, cluster, engine_for, prefill_gpus))
      prefills.push_back(std::make_shared<Prefill>(Prefill{s, gpus - prefill_gpus, {}, {}}));
  // Each prefill pool once, all on the threads; then each with every decode pool of the rest.
  parallel_for(threads, prefills.size(), [&](size_t i) {
    try {
      prefills[i]->served = simulate_prefill_pool(model, cluster, cost, prefills[i]->shape.pool, requests);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      prefills[i]->why = e.what();
    }
  });
  std::vector<ServingJob> jobs;
  for (const std::shared_ptr<Prefill>& shared : prefills) {
    const Prefill& prefill = *shared;
    const std::string pool = "prefill pool " + shape_text(prefill.shape);
    if (!prefill.served) {
      jobs.push_back({pool, {}, {}, 0, prefill.why});
      continue;
    }
    for (const PoolShape& d : pool_shapes(model, cluster, engine_for, prefill.decode_gpus)) {
      const ServingPool decode = d.pool;
      ServingJob job{pool + ", decode pool " + shape_text(d),
                     [&, shared, d] {
                       const Prefill& prefill = *shared;
                       const DisaggregatedResult r = simulate_decode_pool(model, cluster, cost, prefill.shape.pool,
                                                                          *prefill.served, d.pool, requests);
                       ServingPlan p;
                       p.tp = d.tp;
                       p.pp = d.pp;
                       p.replicas = d.pool.replicas;
                       p.dp_attention = d.dp;
                       p.prefill_tp = prefill.shape.tp;
                       p.prefill_pp = prefill.shape.pp;
                       p.prefill_replicas = prefill.shape.pool.replicas;
                       p.prefill_dp_attention = prefill.shape.dp;
                       p.kv_capacity_tokens = r.decode.kv_capacity_tokens;
                       judge_serving(p, r.served, slo);
                       return p;
                     },
                     {},
                     serving_pool_work(model, decode.engine, decode.replicas * decode.dp_attention, requests),
                     {}};
      // A decode pool of single engines has a floor to prune with; a lockstep group none (its step waits on every
      // engine's batch, which one request alone does not bound).
      if (d.dp == 1)
        job.floor = [&, shared, decode] {
          return decode_pool_floor(model, cluster, cost, shared->shape.pool, *shared->served, decode, requests);
        };
      jobs.push_back(std::move(job));
    }
  }
  return jobs;
}

}  // namespace pw
