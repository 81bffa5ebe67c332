#include "serving/dp_attention_serving.hpp"

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "core/expert_parallel.hpp"
#include "core/special_values.hpp"
#include "core/stage_costs.hpp"
#include "serving/serving_engine.hpp"
#include "serving/serving_replicas.hpp"

namespace pw {

namespace {

constexpr double kDispatchBytes = 2;  // bf16 token copies

ParallelConfig folded(int tp, int dp) {
  ParallelConfig pc;
  pc.tp = tp;
  pc.dp = dp;
  pc.ep = tp * dp;
  return pc;
}

void check_dp_attention(const Model& model, const ServingConfig& engine, int dp) {
  const TransformerConfig* t = model.transformer ? &*model.transformer : nullptr;
  if (!t || !t->moe)
    throw_bad_input("--dp-attention: model '{}' has no routed experts; data-parallel attention spreads a mixture of "
                    "experts' experts over the engines (serve copies of a dense engine with --replicas)",
                    model.name);
  if (dp < 2) throw_bad_input("--dp-attention: must be at least 2 engines, got {}", dp);
  if (engine.pp != 1)
    throw_bad_input("--dp-attention: each engine runs one stage (pp 1), got --pp {}; use --tp for a wider engine",
                    engine.pp);
  if (engine.speculative_tokens > 0)
    throw_bad_input("--dp-attention with --speculative-tokens: the lockstep engines' draft steps are not modelled; "
                    "leave one of them out");
  const int ep = dp * engine.tp;
  if (t->moe->experts % ep != 0)
    throw_bad_input("--dp-attention {} x --tp {}: the {} routed experts do not split evenly over {} GPUs; pick dp x tp "
                    "dividing {}",
                    dp, engine.tp, t->moe->experts, ep, t->moe->experts);
}

// The group's links, the same at every step: found once per simulation, not in its loop.
struct StepLinks {
  LinkSpec tp;
  AllToAllLinks ep;
};

StepLinks step_links(const Cluster& cluster, int tp, int dp) {
  const ParallelConfig pc = folded(tp, dp);
  return {group_links(cluster, pc, 0).tp, all_to_all_links(cluster, pc, 0)};
}

double step_time(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingConfig& engine,
                 const StepLinks& links, const std::vector<ServingBatch>& batches) {
  const TransformerConfig& t = *model.transformer;
  const GpuSpec& gpu = cluster.gpu_at(0);
  ServingExperts experts{links.ep.ranks, 0};
  long busiest = 0;
  bool prefill = false;
  for (const ServingBatch& b : batches) {
    experts.tokens += static_cast<double>(b.tokens());
    busiest = std::max(busiest, b.tokens());
    prefill = prefill || b.prefill_tokens > 0;
  }
  // The dispatch and combine of the busiest engine's GPU: its share of the engine's tokens, top_k copies each, on
  // DeepEP's kernels as the export launches SGLang (`--moe-a2a-backend deepep`, its default mode auto: the normal
  // kernels for a step with prefills, the low-latency ones for decodes alone).
  const double tokens = static_cast<double>(busiest) / engine.tp;
  LayerWork exchange;
  exchange.forward.all_to_alls.assign(2, kDispatchBytes * tokens * t.moe->top_k * t.hidden);
  exchange.forward.dispatch = RoutedDispatch{t.moe->experts, t.moe->top_k, false, 0, 0, tokens, static_cast<int>(t.hidden),
                                             prefill ? DeepEpKernels::Normal : DeepEpKernels::LowLatency};
  const double all_to_all = busiest > 0 ? cost.expert_comm_time(exchange, Phase::Forward, links.ep) : 0;
  double step = 0;
  for (const Layer& l : model.layers) {
    if (l.kind == LayerKind::Mtp) continue;
    double slowest = 0;
    for (const ServingBatch& b : batches)
      slowest = std::max(slowest, cost.serving_time(l, serving_layer_work(model, l, engine.tp, b, engine.kv_dtype,
                                                                          engine.weights, experts),
                                                    gpu, links.tp, engine.tp));
    step += slowest;
    if (l.kind == LayerKind::Block && t.moe_block(l.block)) step += all_to_all;
  }
  return step;
}

}  // namespace

double dp_attention_step_time(const Model& model, const Cluster& cluster, const CostModel& cost,
                              const ServingConfig& engine, const std::vector<ServingBatch>& batches) {
  return step_time(model, cluster, cost, engine, step_links(cluster, engine.tp, static_cast<int>(batches.size())),
                   batches);
}

ServingResult simulate_dp_attention(const Model& model, const Cluster& cluster, const CostModel& cost,
                                    const ServingConfig& engine, int dp, const std::vector<ServingRequest>& requests) {
  check_dp_attention(model, engine, dp);
  cluster.check_capacity(dp * engine.tp);
  ServingConfig rank_config = engine;
  rank_config.ep = dp * engine.tp;
  // Each engine's requests (every dp-th) and its share of a closed loop, as replicas take them. The engines keep
  // references to both, so both live here until the end.
  std::vector<std::vector<ServingRequest>> mine;
  std::vector<ServingConfig> configs(static_cast<size_t>(dp), rank_config);
  for (int r = 0; r < dp; ++r) {
    mine.push_back(dealt_to(requests, r, dp));
    configs[static_cast<size_t>(r)].concurrency = concurrency_share(engine.concurrency, r, dp);
  }
  std::vector<std::unique_ptr<ServingEngine>> engines;
  for (int r = 0; r < dp; ++r)
    engines.push_back(std::make_unique<ServingEngine>(model, cluster, cost, configs[static_cast<size_t>(r)],
                                                      mine[static_cast<size_t>(r)]));
  const StepLinks links = step_links(cluster, engine.tp, dp);
  double now = 0;
  const auto all_done = [&] {
    return std::all_of(engines.begin(), engines.end(), [](const auto& e) { return e->done(); });
  };
  while (!all_done()) {
    std::vector<ServingStep> steps(static_cast<size_t>(dp));
    std::vector<ServingBatch> batches(static_cast<size_t>(dp));
    bool any = false;
    for (size_t r = 0; r < engines.size(); ++r) {
      engines[r]->complete_until(now);
      engines[r]->admit_arrivals(now);
      steps[r] = engines[r]->schedule();
      batches[r] = serving_batch(steps[r]);
      any = any || !steps[r].empty();
    }
    if (!any) {
      // Nothing to run: wait for the next arrival anywhere.
      if (all_done()) break;
      double next = kInf;
      for (const auto& e : engines) next = std::min(next, e->next_arrival_s());
      if (next == kInf) throw_runtime("serving simulation: data-parallel engines have requests left and nothing can run");
      now = std::max(now, next);
      continue;
    }
    const double time = step_time(model, cluster, cost, rank_config, links, batches);
    for (size_t r = 0; r < engines.size(); ++r) engines[r]->launch_timed(std::move(steps[r]), now, time);
    now += time;
  }
  // The engines' requests together in the order given; every engine ran every step, so batches are steps.
  ServingResult all;
  all.requests.resize(requests.size());
  for (size_t r = 0; r < engines.size(); ++r) merge_engine_result(all, engines[r]->result(), r, engines.size());
  all.token_gaps.settle();
  all.batches = engines.front()->result().batches;
  return all;
}

ServingResult simulate_dp_attention_groups(const Model& model, const Cluster& cluster, const CostModel& cost,
                                           const ServingConfig& engine, int dp, int groups,
                                           const std::vector<ServingRequest>& requests) {
  if (groups < 1) throw_bad_input("--replicas: must be at least 1, got {}", groups);
  cluster.check_capacity(groups * dp * engine.tp);
  return simulate_copies(engine, groups, requests, [&](const ServingConfig& c, const std::vector<ServingRequest>& mine) {
    return simulate_dp_attention(model, cluster, cost, c, dp, mine);
  });
}

}  // namespace pw
