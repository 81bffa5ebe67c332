#include "serving/dp_attention_serving.hpp"

#include <algorithm>
#include <memory>
#include <tuple>

#include "core/error.hpp"
#include "core/expert_parallel.hpp"
#include "core/overlapped_pair.hpp"
#include "core/special_values.hpp"
#include "core/stage_costs.hpp"
#include "serving/serving_engine.hpp"
#include "serving/serving_replicas.hpp"

namespace pw {

namespace {

// DeepEP's token copies as SGLang sends them: with fp8 weights its DeepGEMM path quantizes every token before the
// dispatch, in groups of 128 elements with a float32 scale each (sglang_per_token_group_quant_fp8 in
// srt/layers/moe/token_dispatcher/deepep.py, dispatch_a): 1 + 4 / 128 bytes an element; bf16 otherwise. The
// combine returns the experts' outputs in bf16.
constexpr double kBf16Bytes = 2;
double dispatch_bytes_per_element(ServingWeights weights) { return weights == ServingWeights::Fp8 ? 1 + 4.0 / 128 : kBf16Bytes; }

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
  const int ep = dp * engine.tp;
  if (engine.redundant_experts < 0 || engine.redundant_experts > kMaxRedundantExperts)
    throw_bad_input("--redundant-experts: must be from 0 to {}, got {}", kMaxRedundantExperts, engine.redundant_experts);
  const int slots = t->moe->experts + engine.redundant_experts;
  if (slots % ep != 0 && engine.redundant_experts > 0)
    throw_bad_input("--dp-attention {} x --tp {}: the {} routed experts and {} redundant ones do not split evenly over {} "
                    "GPUs; pick --redundant-experts so that experts + redundant is a multiple of {}",
                    dp, engine.tp, t->moe->experts, engine.redundant_experts, ep, ep);
  if (slots % ep != 0)
    throw_bad_input("--dp-attention {} x --tp {}: the {} routed experts do not split evenly over {} GPUs; pick dp x tp "
                    "dividing {}, or add redundant experts (--redundant-experts) to a multiple of {}",
                    dp, engine.tp, t->moe->experts, ep, t->moe->experts, ep);
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

// One MoE layer's dispatch and combine on the GPU with the most tokens (`tokens`, its share of its engine's batch),
// on DeepEP's kernels as the export launches SGLang (`--moe-a2a-backend deepep`, its default mode auto: the normal
// kernels for a step with prefills, the low-latency ones for decodes alone). The normal kernels send a token once to
// each other node holding any of its experts (over RDMA, then to those GPUs over NVLink), within its top groups
// under group-limited routing; the low-latency ones send every copy straight to its expert's GPU. The cost model is
// asked once for all `layers` MoE layers of the step (a table-priced one then counts each in its report) and the
// step's layers share the answer: asking layer by layer was a tenth of a lockstep simulation.
double exchange_time(const TransformerConfig& t, const CostModel& cost, const ServingConfig& engine,
                     const AllToAllLinks& links, double tokens, bool prefill, int layers) {
  if (tokens <= 0 || layers <= 0) return 0;
  const DeepEpKernels kernels = prefill ? DeepEpKernels::Normal : DeepEpKernels::LowLatency;
  const double copies = tokens * t.moe->top_k * t.hidden;
  LayerWork exchange;
  for (int l = 0; l < layers; ++l)
    exchange.forward.all_to_alls.insert(exchange.forward.all_to_alls.end(),
                                        {dispatch_bytes_per_element(engine.weights) * copies, kBf16Bytes * copies});
  exchange.forward.dispatch = RoutedDispatch{t.moe->experts, t.moe->top_k, kernels == DeepEpKernels::Normal,
                                             t.moe->groups, t.moe->top_groups, tokens, static_cast<int>(t.hidden), kernels};
  return cost.expert_comm_time(exchange, Phase::Forward, links) / layers;
}

int moe_layers(const Model& model) {
  const TransformerConfig& t = *model.transformer;
  int n = 0;
  for (const Layer& l : model.layers) n += l.kind == LayerKind::Block && t.moe_block(l.block);
  return n;
}

// Each batch once: engines given alike batches, as a lockstep step often gives them, are one question to the cost
// model and one share of its report.
std::vector<ServingBatch> distinct_batches(const std::vector<ServingBatch>& batches) {
  const auto fields = [](const ServingBatch& b) {
    return std::tie(b.prefill_tokens, b.prefill_sequences, b.prefill_pairs, b.prefill_kv_reads, b.decode_tokens,
                    b.decode_context, b.sampled_tokens);
  };
  std::vector<ServingBatch> distinct = batches;
  std::sort(distinct.begin(), distinct.end(), [&](const ServingBatch& a, const ServingBatch& b) { return fields(a) < fields(b); });
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  return distinct;
}

// Layer l's time on the engine slowest at it (`distinct`: the engines' batches), its experts seeing every engine's
// tokens.
double slowest_layer(const Model& model, const Layer& l, const Cluster& cluster, const CostModel& cost,
                     const ServingConfig& engine, const StepLinks& links, const std::vector<ServingBatch>& distinct,
                     const ServingExperts& experts) {
  double slowest = 0;
  for (const ServingBatch& b : distinct)
    slowest = std::max(slowest, cost.serving_time(l, serving_layer_work(model, l, engine.tp, b, engine.kv_dtype,
                                                                        engine.weights, experts),
                                                  cluster.gpu_at(0), links.tp, engine.tp));
  return slowest;
}

ServingExperts experts_of(const StepLinks& links, const ServingConfig& engine, const std::vector<ServingBatch>& batches) {
  ServingExperts experts{links.ep.ranks, 0, engine.redundant_experts};
  for (const ServingBatch& b : batches) experts.tokens += static_cast<double>(b.tokens());
  return experts;
}

// Each layer's time on the engine slowest at it, for every engine's batch.
std::vector<double> slowest_layers(const Model& model, const Cluster& cluster, const CostModel& cost,
                                   const ServingConfig& engine, const StepLinks& links,
                                   const std::vector<ServingBatch>& batches) {
  const ServingExperts experts = experts_of(links, engine, batches);
  const std::vector<ServingBatch> distinct = distinct_batches(batches);
  std::vector<double> slowest(model.layers.size(), 0.0);
  for (size_t i = 0; i < model.layers.size(); ++i)
    if (model.layers[i].kind != LayerKind::Mtp)
      slowest[i] = slowest_layer(model, model.layers[i], cluster, cost, engine, links, distinct, experts);
  return slowest;
}

long busiest_tokens(const std::vector<ServingBatch>& batches) {
  long busiest = 0;
  for (const ServingBatch& b : batches) busiest = std::max(busiest, b.tokens());
  return busiest;
}

bool any_prefill(const std::vector<ServingBatch>& batches) {
  return std::any_of(batches.begin(), batches.end(), [](const ServingBatch& b) { return b.prefill_tokens > 0; });
}

double step_time(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingConfig& engine,
                 const StepLinks& links, const std::vector<ServingBatch>& batches) {
  const TransformerConfig& t = *model.transformer;
  const bool prefill = any_prefill(batches);
  if (engine.two_batch_overlap && busiest_tokens(batches) >= 2) {
    // SGLang's two-batch overlap (--enable-two-batch-overlap, srt/batch_overlap/two_batch_overlap.py): every
    // engine's batch in two halves whose layers run in turn, one half's dispatch and combine beside the other's
    // compute; the all-to-alls' kernels hold their SMs (the normal kernels' 20, DeepEP's Buffer.num_sms; the
    // low-latency ones wait on a receive hook and hold none).
    std::vector<ServingBatch> first, second;
    for (const ServingBatch& b : batches) {
      const auto [x, y] = split_in_two(b);
      first.push_back(x);
      second.push_back(y);
    }
    const std::vector<double> a = slowest_layers(model, cluster, cost, engine, links, first);
    const std::vector<double> b = slowest_layers(model, cluster, cost, engine, links, second);
    const double share = prefill ? cost.all_to_all_sm_share() : 0.0;
    const int moe = moe_layers(model);
    const double exchange_a =
        exchange_time(t, cost, engine, links.ep, static_cast<double>(busiest_tokens(first)) / engine.tp, prefill, moe);
    const double exchange_b =
        exchange_time(t, cost, engine, links.ep, static_cast<double>(busiest_tokens(second)) / engine.tp, prefill, moe);
    double step = 0;
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const Layer& l = model.layers[i];
      step += l.kind == LayerKind::Block && t.moe_block(l.block)
                  ? overlapped_pair_time(a[i] + exchange_a, exchange_a, b[i] + exchange_b, exchange_b, share)
                  : a[i] + b[i];
    }
    return step;
  }
  const std::vector<double> slowest = slowest_layers(model, cluster, cost, engine, links, batches);
  const int moe = moe_layers(model);
  const double exchange =
      exchange_time(t, cost, engine, links.ep, static_cast<double>(busiest_tokens(batches)) / engine.tp, prefill, moe);
  double step = moe * exchange;
  for (double s : slowest) step += s;
  return step;
}

// Speculative decoding's K draft steps before a lockstep step's verifications: each the draft's block (of the
// model's last block's shape, as the engine's own draft: ServingEngine::draft_runs) and LM head at every engine's
// verifying decodes, the block's experts over the ep group as the model's (a MoE draft block's exchange too: the
// draft steps are lockstep steps of their own). 0 without verifications.
double draft_time(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingConfig& engine,
                  const StepLinks& links, const std::vector<ServingBatch>& drafts) {
  if (engine.speculative_tokens == 0 || busiest_tokens(drafts) == 0) return 0;
  const TransformerConfig& t = *model.transformer;
  const ServingExperts experts = experts_of(links, engine, drafts);
  const std::vector<ServingBatch> distinct = distinct_batches(drafts);
  double step = 0;
  for (auto it = model.layers.rbegin(); it != model.layers.rend(); ++it)
    if (it->kind == LayerKind::Block) {
      step += slowest_layer(model, *it, cluster, cost, engine, links, distinct, experts);
      if (t.moe_block(it->block))
        step += exchange_time(t, cost, engine, links.ep, static_cast<double>(busiest_tokens(drafts)) / engine.tp, false, 1);
      break;
    }
  for (const Layer& l : model.layers)
    if (l.kind == LayerKind::Head) step += slowest_layer(model, l, cluster, cost, engine, links, distinct, experts);
  return engine.speculative_tokens * step;
}

}  // namespace

double dp_attention_step_time(const Model& model, const Cluster& cluster, const CostModel& cost,
                              const ServingConfig& engine, const std::vector<ServingBatch>& batches,
                              const std::vector<ServingBatch>& drafts) {
  const StepLinks links = step_links(cluster, engine.tp, static_cast<int>(batches.size()));
  return step_time(model, cluster, cost, engine, links, batches) + draft_time(model, cluster, cost, engine, links, drafts);
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
    std::vector<ServingBatch> batches(static_cast<size_t>(dp)), drafts(static_cast<size_t>(dp));
    bool any = false;
    for (size_t r = 0; r < engines.size(); ++r) {
      engines[r]->complete_until(now);
      engines[r]->admit_arrivals(now);
      steps[r] = engines[r]->schedule();
      batches[r] = serving_batch(steps[r]);
      if (engine.speculative_tokens > 0) drafts[r] = draft_batch(steps[r]);
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
    const double time =
        step_time(model, cluster, cost, rank_config, links, batches) + draft_time(model, cluster, cost, rank_config, links, drafts);
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
