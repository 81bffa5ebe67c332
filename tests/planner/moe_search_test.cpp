// The search over expert parallelism: with ep and etp searched its best plans still equal exhaustive scoring,
// and the bounds that prune MoE candidates (the cheapest all-to-all any placement has; F&B composites charged
// without all-to-alls) stay below what evaluate() reports: with the host's floor under MoE blocks and without.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <set>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "planner/baseline_splits.hpp"
#include "planner/partitioner.hpp"
#include "planner/search.hpp"
#include "planner/search_bounds.hpp"
#include "schedules/generators.hpp"
#include "screened_candidate.hpp"
#include "small_cluster.hpp"

using namespace pw;
using pw::test::small_cluster;

namespace {

// 8 experts of 1024 (top 2) after one dense block: small enough to search exhaustively on 8 GPUs.
Scenario moe_base(int global_batch) {
  Scenario s;
  s.model = model_from_json_text(R"({"name": "moe-small", "transformer": {"hidden": 1024, "layers": 8, "heads": 16,
      "kv_heads": 4, "ffn": 4096, "vocab": 32000, "seq_len": 2048, "mlp": "swiglu", "norm": "rmsnorm",
      "moe": {"experts": 8, "top_k": 2, "expert_ffn": 1024, "first_dense": 1}}})", "moe-small.json");
  s.cluster = small_cluster();
  s.global_batch_size = global_batch;
  return s;
}

SearchSpace moe_space() {
  SearchSpace space;
  space.gpus = 8;
  space.schedules = {"1f1b", "interleaved", "interleaved-overlap", "dualpipev"};
  return space;
}

// The default model, under which this small model's blocks wait on the host (moe_host_s), and one without that
// floor, where the GPU sets their pace.
std::vector<AnalyticCostModel> host_bound_and_not() {
  AnalyticCostParams gpu_only;
  gpu_only.moe_host_s = 0;
  return {AnalyticCostModel(), AnalyticCostModel(gpu_only)};
}

}  // namespace

TEST_CASE("with ep searched, the best plans equal exhaustive scoring and name ep and etp") {
  for (const AnalyticCostModel& cost : host_bound_and_not()) {
    INFO("moe_host_s " << cost.params().moe_host_s);
    const Scenario base = moe_base(32);
    const std::vector<Candidate> all = enumerate_candidates(base, moe_space());
    std::set<std::pair<int, int>> experts;
    for (const Candidate& c : all) {
      experts.insert({c.ep, c.etp});
      CHECK(c.tp * c.cp * c.dp % (c.ep * c.etp) == 0);
    }
    CHECK(experts.count({8, 1}) == 1);
    CHECK(experts.count({4, 2}) == 1);
    SearchOptions pruned, exhaustive;
    pruned.top = exhaustive.top = 5;
    exhaustive.prune = false;
    const SearchResult fast = search_plans(base, moe_space(), cost, pruned);
    const SearchResult every = search_plans(base, moe_space(), cost, exhaustive);
    REQUIRE(fast.plans.size() == every.plans.size());
    for (size_t i = 0; i < fast.plans.size(); ++i) {
      INFO(describe(fast.plans[i].config) << " vs " << describe(every.plans[i].config));
      CHECK(fast.plans[i].config == every.plans[i].config);
      CHECK(fast.plans[i].evaluation.metrics.step_time_s == every.plans[i].evaluation.metrics.step_time_s);
    }
    CHECK(fast.stats.simulated < every.stats.simulated);
  }
  CHECK(describe(Candidate{2, 2, 2, 1, 1, 8, "1f1b", Recompute::None, RankOrder::TpPpDp, 1, Precision::Bf16, 1, 4, 1})
            .starts_with("tp=2, ep=4, pp=2, dp=2"));
}

TEST_CASE("the MoE bounds stay below what evaluate() reports") {
  for (const AnalyticCostModel& cost : host_bound_and_not()) {
    INFO("moe_host_s " << cost.params().moe_host_s);
    const Scenario base = moe_base(16);
    int checked = 0, composites = 0;
    for (const Candidate& c : enumerate_candidates(base, moe_space())) {
      if (c.micro_batch_size > 1 || c.ep == 1) continue;
      Scenario s;
      if (!pw::test::screened(base, c, cost, s)) continue;  // invalid, or no split fits
      const Evaluation ev = evaluate(s, cost);
      const ParallelConfig& pc = s.parallel;
      const LayerTable t = make_layer_table(s.model, s.workload, pc.tp, s.cluster, cost, pw::test::tp_group_gpus(pc),
                                            least_all_to_all_links(s.cluster, pc.ep));
      const bool composite = has_composites(ev.schedule);
      INFO(describe(c));
      const double step = ev.metrics.step_time_s;
      const int chunks = ev.schedule.num_stages() / pc.pp;
      CHECK(step_time_bound(with_all_to_alls_hidden(t), pc.pp, chunks, pc.microbatches) <= step * (1 + 1e-9));
      if (!composite) CHECK(step_time_bound(t, pc.pp, chunks, pc.microbatches) <= step * (1 + 1e-9));
      composites += composite ? 1 : 0;
      ++checked;
    }
    CHECK(checked > 20);
    CHECK(composites > 0);
  }
}

TEST_CASE("the parameters split counts each MoE block's routed experts (DeepSpeed's partition_method)") {
  const Model v3 = model_preset("deepseek-v3");
  const std::vector<double> counts = layer_parameter_counts(v3);
  const TransformerConfig& c = *v3.transformer;
  // Layer 1 + i is block i: blocks 0..2 dense, 3.. MoE with 256 experts of 3 x 7168 x 2048.
  CHECK(counts[1] == layer_parameters(c, LayerKind::Block, 0, 1).total());
  CHECK(counts[4] == layer_parameters(c, LayerKind::Block, 3, 1).total());
  CHECK(counts[4] - counts[1] > 256.0 * 3 * 7168 * 2048 - 3.0 * 7168 * 18432);
}
