// The configuration search: its best plans equal exhaustive scoring (pruning is sound), its result does
// not depend on the thread count, every bound it prunes with stays below what evaluate() reports, and
// its messages name the binding constraint.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "planner/baseline_splits.hpp"
#include "planner/partitioner.hpp"
#include "planner/search.hpp"
#include "screened_candidate.hpp"
#include "small_cluster.hpp"
#include "planner/search_bounds.hpp"
#include "schedules/generators.hpp"

using namespace pw;
using pw::test::small_cluster;

namespace {


Scenario base_scenario(const std::string& model, const Cluster& cluster, int global_batch, int seq_len = 1024) {
  Scenario s;
  s.model = model_preset(model);
  s.cluster = cluster;
  s.global_batch_size = global_batch;
  s.workload.seq_len = seq_len;
  s.workload.flash_attention = false;  // the stored s x s scores put many candidates over memory
  return s;
}

SearchSpace small_space() {
  SearchSpace space;
  space.gpus = 8;
  space.schedules = {"1f1b", "gpipe", "interleaved", "zb-h1", "zb-v"};
  return space;
}

std::string ranges_text(const Evaluation& ev) {
  std::string out;
  for (const StageReport& st : ev.stages) out += fmt::format("[{},{}]", st.layers.first, st.layers.last);
  return out;
}

// Configs, their twins, step times (exactly) and splits, in order.
void check_same_plans(const SearchResult& a, const SearchResult& b) {
  REQUIRE(a.plans.size() == b.plans.size());
  for (size_t i = 0; i < a.plans.size(); ++i) {
    INFO("plan " << i + 1 << ": " << describe(a.plans[i].config) << " vs " << describe(b.plans[i].config));
    CHECK(a.plans[i].config == b.plans[i].config);
    CHECK(a.plans[i].twins == b.plans[i].twins);
    CHECK(a.plans[i].evaluation.metrics.step_time_s == b.plans[i].evaluation.metrics.step_time_s);
    CHECK(ranges_text(a.plans[i].evaluation) == ranges_text(b.plans[i].evaluation));
  }
}

}  // namespace

TEST_CASE("the search's best plans equal exhaustive scoring of the same space") {
  const AnalyticCostModel cost;
  const Scenario base = base_scenario("gpt3-1.3b", small_cluster(), 32);
  for (int top : {1, 5}) {
    SearchOptions pruned, exhaustive;
    pruned.top = exhaustive.top = top;
    exhaustive.prune = false;
    const SearchResult fast = search_plans(base, small_space(), cost, pruned);
    const SearchResult all = search_plans(base, small_space(), cost, exhaustive);
    INFO("top " << top);
    check_same_plans(fast, all);
    CHECK(static_cast<int>(fast.plans.size()) == top);
    // The exhaustive run scores every candidate that is valid and has a split that fits; the pruned one
    // fewer, and memory decided some of them.
    CHECK(all.stats.bound_pruned == 0);
    CHECK(all.stats.memory_pruned == 0);
    CHECK(fast.stats.simulated < all.stats.simulated);
    CHECK(all.stats.over_memory > 0);
  }
}

// DualPipe's two copies of the model: the partitioner splits one copy over the rank pairs, the bounds count a
// copy's micro-batches, and the search's plans are still exactly those of scoring every candidate, none of them
// slower than its uniform or parameters split.
TEST_CASE("with dualpipe searched the best plans equal exhaustive scoring, and no split beats them") {
  const AnalyticCostModel cost;
  const Scenario base = base_scenario("gpt3-1.3b", small_cluster(), 32);
  int dualpipe = 0;
  for (const std::vector<std::string>& schedules : {std::vector<std::string>{"dualpipe"}, {"dualpipe", "dualpipev", "1f1b"}}) {
    SearchSpace space = small_space();
    space.schedules = schedules;
    SearchOptions pruned, exhaustive;
    pruned.top = exhaustive.top = 6;
    exhaustive.prune = false;
    const SearchResult fast = search_plans(base, space, cost, pruned);
    const SearchResult all = search_plans(base, space, cost, exhaustive);
    check_same_plans(fast, all);
    const std::vector<SplitComparison> c = compare_splits(fast.plans, cost);
    for (size_t i = 0; i < fast.plans.size(); ++i) {
      INFO(schedules.size() << " schedules, plan " << i + 1 << ": " << describe(fast.plans[i].config));
      const Evaluation& ev = fast.plans[i].evaluation;
      dualpipe += fast.plans[i].config.schedule == "dualpipe";
      // One copy's parts: the split the scenario takes, whose re-simulation is the plan.
      CHECK(static_cast<int>(ev.scenario.ranges.size()) == ev.schedule.stages_per_copy());
      CHECK(evaluate(ev.scenario, cost).metrics.step_time_s == ev.metrics.step_time_s);
      for (const Evaluation* baseline : {&c[i].uniform, &c[i].parameters})
        if (baseline->metrics.overflows.empty()) CHECK(ev.metrics.step_time_s <= baseline->metrics.step_time_s);
    }
  }
  CHECK(dualpipe >= 6);
}

// The plan table's "vs uniform" and "vs params" columns are never negative: each plan's split is searched
// by simulated step time from those two (planner/fastest_split.hpp).
TEST_CASE("no plan loses to the uniform or the parameters split of its configuration") {
  const AnalyticCostModel cost;
  for (const char* model : {"gpt3-1.3b", "llama3-8b"}) {
    const Scenario base = base_scenario(model, small_cluster(), 32);
    SearchOptions o;
    o.top = 8;
    const SearchResult r = search_plans(base, small_space(), cost, o);
    const std::vector<SplitComparison> c = compare_splits(r.plans, cost);
    REQUIRE(c.size() == r.plans.size());
    for (size_t i = 0; i < r.plans.size(); ++i) {
      INFO(model << " plan " << i + 1 << ": " << describe(r.plans[i].config));
      const double step = r.plans[i].evaluation.metrics.step_time_s;
      for (const Evaluation* baseline : {&c[i].uniform, &c[i].parameters})
        if (baseline->metrics.overflows.empty()) CHECK(step <= baseline->metrics.step_time_s);
    }
  }
}

TEST_CASE("the result does not depend on the number of threads") {
  const AnalyticCostModel cost;
  const Scenario base = base_scenario("gpt3-1.3b", small_cluster(), 32);
  SearchOptions one;
  one.top = 4;
  one.threads = 1;
  const SearchResult reference = search_plans(base, small_space(), cost, one);
  // Repeated: a thread that stopped the queue once cut short another's twin group about one run in fifty.
  for (int run = 0; run < 10; ++run)
    for (int threads : {2, 4, 8}) {
      SearchOptions o = one;
      o.threads = threads;
      INFO(threads << " threads, run " << run + 1);
      check_same_plans(search_plans(base, small_space(), cost, o), reference);
    }
}

TEST_CASE("every bound stays below what evaluate() reports") {
  const AnalyticCostModel cost;
  const Scenario base = base_scenario("gpt3-1.3b", small_cluster(), 16);
  SearchSpace space = small_space();
  space.schedules = schedule_names();  // every schedule plan searches, dualpipe's two copies of the model too
  int checked = 0, copies = 0;
  for (const Candidate& c : enumerate_candidates(base, space)) {
    if (c.micro_batch_size > 2) continue;  // keep the test quick: the bounds do not depend on it
    Scenario s;
    if (!pw::test::screened(base, c, cost, s)) continue;  // invalid, or no split fits
    const Evaluation ev = evaluate(s, cost);
    const ParallelConfig& pc = s.parallel;
    const LayerTable t = make_layer_table(s.model, s.workload, pc.tp, s.cluster, cost, pw::test::tp_group_gpus(pc));
    const double spp = state_bytes_per_parameter(cost, pc);
    const double reserve = cost.memory_reserve_bytes();
    std::vector<int> rank_gpu;
    for (int r = 0; r < pc.pp; ++r) rank_gpu.push_back(pipeline_rank_gpu(pc, r));
    std::vector<StageCost> costs;
    for (const StageReport& st : ev.stages) costs.push_back(st.cost);
    // The order simulated (zb-auto builds its order from the stage costs).
    const Schedule& simulated = ev.schedule;

    INFO(describe(c));
    const double step = ev.metrics.step_time_s;
    CHECK(step_time_bound(t, pc.pp, simulated.num_stages() / pc.pp, pc.microbatches, simulated.copies) <= step * (1 + 1e-9));
    CHECK(step_time_bound(simulated, costs, rank_gpu, s.cluster, cost) <= step * (1 + 1e-9));
    CHECK(rank_path_bound(simulated, costs) <= step_time_bound(simulated, costs, rank_gpu, s.cluster, cost) * (1 + 1e-9));
    // zb-auto's candidates are bounded before their order is made, on the order its name alone gives.
    if (c.schedule == "zb-auto")
      CHECK(rank_path_bound(make_schedule({"zb-auto", pc.pp, pc.microbatches}), costs, false) <= step * (1 + 1e-9));
    const double peak = ev.metrics.peak_memory_bytes;
    CHECK(memory_bound(t, pc.pp, spp, reserve) <= peak * (1 + 1e-9));
    // The schedule's holdings bound a split of one copy (the search takes the average with copies).
    if (simulated.copies == 1) CHECK(memory_bound(t, summarize(simulated), spp, reserve) <= peak * (1 + 1e-9));
    copies += simulated.copies > 1;
    // The walk adds and subtracts in the simulator's order: the same numbers, bit for bit.
    const std::vector<double> walked = rank_peak_memory(simulated, costs);
    for (const RankStats& r : ev.sim.ranks) CHECK(walked[static_cast<size_t>(r.rank)] == r.peak_memory_bytes);
    ++checked;
  }
  CHECK(checked > 100);
  CHECK(copies > 10);
}

TEST_CASE("the step-time bound of one chunk per rank is 1F1B's time when stages are equal") {
  // Four identical layers of F + B + W = 3 (F = B = W = 1, no transfers) on pp = 4, m = 8: the busiest
  // stage carries m x 3 = 24, and the fill around the last stage is P(<3) + m (F + B) = 3 x 2 + 8 x 2 = 22;
  // 1F1B's step is (m + p - 1) x 3 = 33 with fused B and W, so the bound is 24 (zero-bubble schedules can
  // approach it).
  LayerTable t;
  t.fastest = {3, 3, 3, 3};
  t.fastest_fb = {2, 2, 2, 2};
  t.total_time = 12;
  t.max_time = 3;
  CHECK(step_time_bound(t, 4, 1, 8) == Approx(24).epsilon(1e-9));
  // m = 1: the busy part is 3, the fill around the last stage 3 x 2 + 1 x 2 = 8, the whole model's F + B.
  CHECK(step_time_bound(t, 4, 1, 1) == Approx(8).epsilon(1e-9));
  CHECK(step_time_bound(t, 4, 1, 1) <= 8);
}

TEST_CASE("a rank's path bound is the forwards before it, its actions back to back and the backwards after it") {
  // 1F1B on 4 stages, 8 micro-batches: every rank runs 8 F and 8 BW of its stage. Stage 2 is the slowest
  // (F 2, B 3, W 1): 8 x 6 = 48 of actions, after the forwards of stages 0 and 1 (1 + 1) and before their
  // backwards of the last micro-batch (1 + 1): 52. Rank 3: 4 + 24 + 5 = 33. The schedule timed as soon as
  // possible takes longer (it waits on every micro-batch's transfers, not only the first and last).
  ScheduleSpec spec;
  spec.name = "1f1b";
  spec.ranks = 4;
  spec.microbatches = 8;
  const Schedule s = make_schedule(spec);
  std::vector<StageCost> stages(4);
  for (int st = 0; st < 4; ++st) {
    stages[static_cast<size_t>(st)].forward_s = st == 2 ? 2 : 1;
    stages[static_cast<size_t>(st)].backward_input_s = st == 2 ? 3 : 1;
    stages[static_cast<size_t>(st)].backward_weight_s = 1;
  }
  CHECK(rank_path_bound(s, stages) == 52);
  // Without its order known, rank 2's last action may be a W: no backwards after it, and rank 3's 4 + 24.
  CHECK(rank_path_bound(s, stages, false) == 50);
  // The slowest rank's optimizer step comes after.
  std::vector<StageCost> with_optimizer = stages;
  with_optimizer[1].optimizer_s = 0.5;
  CHECK(rank_path_bound(s, with_optimizer) == 52.5);
  Cluster ideal;
  ideal.ideal = true;
  const AnalyticCostModel cost;
  CHECK(step_time_bound(s, stages, {0, 1, 2, 3}, ideal, cost) >= 52);
  // DualPipeV's composites may take less than their halves: no bound.
  ScheduleSpec v;
  v.name = "dualpipev";
  v.ranks = 2;
  v.chunks = 2;
  v.microbatches = 8;
  const Schedule dual = make_schedule(v);
  REQUIRE(has_composites(dual));
  CHECK(rank_path_bound(dual, std::vector<StageCost>(4, stages[0])) == 0);
}

TEST_CASE("candidates follow the degrees' rules") {
  // gpt3-1.3b (16 heads, 26 layers) on the ideal cluster (no node limit), 4 GPUs, --max-tp 1: pp in
  // {1, 2, 4}, dp = 4 / pp; global batch 8: micro-batch sizes divide 8 / dp: pp 1 (dp 4): {1, 2}; pp 2
  // (dp 2): {1, 2, 4}; pp 4 (dp 1): {1, 2, 4, 8}. With 1f1b only (vpp 1) and one recompute mode:
  // 2 + 3 + 4 = 9 candidates, in config order (tp, pp, dp, vpp, micro-batch size, schedule, recompute).
  Scenario base;
  base.model = model_preset("gpt3-1.3b");
  base.cluster = cluster_preset("ideal");
  base.global_batch_size = 8;
  SearchSpace space;
  space.gpus = 4;
  space.max_tp = 1;
  space.schedules = {"1f1b"};
  space.recomputes = {Recompute::None};
  const std::vector<Candidate> c = enumerate_candidates(base, space);
  REQUIRE(c.size() == 9);
  CHECK(c.front() == Candidate{1, 1, 4, 1, 1, 2, "1f1b", Recompute::None});
  CHECK(c.back() == Candidate{1, 4, 1, 1, 8, 1, "1f1b", Recompute::None});
  for (size_t i = 1; i < c.size(); ++i) CHECK(config_less(c[i - 1], c[i]));

  // An explicit-cost model (tiny-uniform, 8 layers) runs at tp 1, micro-batch size 1 and no recompute
  // (its costs are per micro-batch as given): pp 1, 2, 4, one candidate each.
  Scenario explicit_base = base;
  explicit_base.model = load_model(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-uniform.json");
  SearchSpace all;
  all.gpus = 4;
  all.schedules = {"1f1b"};
  std::vector<int> pps;
  for (const Candidate& x : enumerate_candidates(explicit_base, all)) {
    CHECK(x.tp == 1);
    CHECK(x.micro_batch_size == 1);
    CHECK(x.recompute == Recompute::None);
    pps.push_back(x.pp);
  }
  CHECK(pps == std::vector<int>{1, 2, 4});

  // Looped schedules take vpp 2 .. layers / pp and need pp >= 2: with the 8 layers of tiny-uniform, pp 2
  // gives vpp 2, 3, 4 and pp 4 gives vpp 2.
  all.schedules = {"interleaved"};
  std::vector<int> vpps;
  for (const Candidate& x : enumerate_candidates(explicit_base, all)) vpps.push_back(x.pp * 10 + x.vpp);
  CHECK(vpps == std::vector<int>{22, 23, 24, 42});

  // Fixing a dimension keeps only it.
  space.max_tp = 1;
  space.schedules = {"1f1b", "gpipe"};
  space.pp = 2;
  space.micro_batch_size = 4;
  const std::vector<Candidate> fixed = enumerate_candidates(base, space);
  REQUIRE(fixed.size() == 2);
  CHECK(fixed[0] == Candidate{1, 2, 2, 1, 4, 1, "1f1b", Recompute::None});
  CHECK(fixed[1] == Candidate{1, 2, 2, 1, 4, 1, "gpipe", Recompute::None});
}

TEST_CASE("tensor parallelism stays inside a node and shards the heads") {
  // gpt3-1.3b has 16 heads; nodes of 4 GPUs: tp in {1, 2, 4}; --max-tp 2 leaves {1, 2}.
  const Scenario base = base_scenario("gpt3-1.3b", small_cluster(), 8);
  SearchSpace space;
  space.gpus = 8;
  space.schedules = {"1f1b"};
  space.recomputes = {Recompute::None};
  std::vector<int> tps;
  for (const Candidate& c : enumerate_candidates(base, space))
    if (tps.empty() || tps.back() != c.tp) tps.push_back(c.tp);
  CHECK(tps == std::vector<int>{1, 2, 4});
  space.max_tp = 2;
  tps.clear();
  for (const Candidate& c : enumerate_candidates(base, space))
    if (tps.empty() || tps.back() != c.tp) tps.push_back(c.tp);
  CHECK(tps == std::vector<int>{1, 2});
}

namespace {

std::string search_error(const Scenario& base, const SearchSpace& space, const CostModel& cost) {
  try {
    search_plans(base, space, cost);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("no feasible plan names the binding constraint and by how much") {
  // tiny-uniform: 8 layers of 1e6 parameters (2 MB of bf16 weights) and 4 MB of activations per
  // micro-batch (explicit costs: searched at micro-batch size 1 only). Two 20 MB GPUs, no reserve or headroom; global
  // batch 2; 1f1b and gpipe. pp 1 (dp 2, m 1): 8e6 parameters x (2 + 4 + 12 / 2) bytes + 8 x 4 MB = 128 MB.
  // pp 2 (dp 1, m 2): 18 bytes a parameter, 18 MB a layer; both schedules hold 2 micro-batches on rank 0
  // (1F1B: min(p, m) = 2), so with a layers there rank 0 needs 18a + 2 x 4a = 26a MB and rank 1 at least
  // 22 (8 - a) MB: the best is a = 4, 104 MB, 84 MB more than 20 MB. 1f1b and gpipe tie; 1f1b comes first
  // in config order.
  AnalyticCostParams params;
  params.memory_reserve_bytes = 0;
  const AnalyticCostModel cost(params);
  Scenario base;
  base.model = load_model(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-uniform.json");
  base.cluster = cluster_from_json_text(R"({"name": "tiny", "nodes": 1, "gpus_per_node": 2,
      "gpu": {"name": "20MB", "peak_tflops": 1, "memory_bytes": 2e7, "hbm_bytes_per_s": 1e12},
      "intra_node": {"bandwidth_bytes_per_s": 1e11, "latency_s": 0},
      "inter_node": {"bandwidth_bytes_per_s": 1e10, "latency_s": 0}, "memory_headroom": 0})",
                                        "tiny cluster");
  base.global_batch_size = 2;
  SearchSpace space;
  space.gpus = 2;
  space.schedules = {"1f1b", "gpipe"};
  CHECK(search_error(base, space, cost) ==
        "no configuration of 2 GPUs fits in memory: the smallest stage needs 104 MB with tp=1, pp=2, dp=1, "
        "micro-batch size 1, 1f1b and no recompute; a plan may use 20.0 MB, 84.0 MB short; use more GPUs or GPUs "
        "with more memory");
  // Half of each GPU kept free: 10 MB to use, 94 MB short.
  Scenario roomy = base;
  roomy.cluster.memory_headroom = 0.5;
  CHECK(search_error(roomy, space, cost) ==
        "no configuration of 2 GPUs fits in memory: the smallest stage needs 104 MB with tp=1, pp=2, dp=1, "
        "micro-batch size 1, 1f1b and no recompute; a plan may use 10.0 MB (20.0 MB less the 50% headroom), 94.0 MB "
        "short; use more GPUs or GPUs with more memory, or a smaller --memory-headroom");
}

TEST_CASE("an empty space names the dimension that empties it") {
  const AnalyticCostModel cost;
  const Scenario base = base_scenario("gpt3-1.3b", cluster_preset("dgx-h100"), 64);
  SearchSpace space;
  space.gpus = 12;
  space.tp = 8;
  CHECK(search_error(base, space, cost) == "--gpus: 12 is not a multiple of --tp 8");
  space = SearchSpace{};
  space.gpus = 8;
  space.tp = 16;
  CHECK(search_error(base, space, cost) ==
        "--tp: 16 exceeds the 8 GPUs of a node in cluster 'dgx-h100'; tensor parallelism stays inside a node");
  space = SearchSpace{};
  space.gpus = 8;
  space.micro_batch_size = 3;
  CHECK(search_error(base, space, cost) ==
        "--micro-batch-size: 3 x dp does not divide the global batch 64 for any dp; use a divisor of 64");
  Scenario odd = base;
  odd.global_batch_size = 3;
  space = SearchSpace{};
  space.gpus = 8;
  space.dp = 2;
  CHECK(search_error(odd, space, cost) == "--global-batch-size: 3 is not a multiple of --dp 2; use 2 or 4");
  space.dp = 16;
  CHECK(search_error(base, space, cost) ==
        "--dp: tp x cp x pp x 16 is never 8 GPUs with tp in {1, 2, 4, 8}, cp in {1} and pp at most the 26 layers of "
        "'gpt3-1.3b'");
  space = SearchSpace{};
  space.gpus = 8;
  space.schedules = {"interleaved"};
  space.pp = 1;
  CHECK(search_error(base, space, cost) ==
        "--schedules: interleaved run several model chunks per rank, which needs pp >= 2 and pp x 2 <= 26 layers; add "
        "a schedule such as 1f1b or allow more pipeline ranks");
  space = SearchSpace{};
  space.gpus = 8;
  space.schedules = {"zigzag"};
  CHECK(search_error(base, space, cost).rfind("--schedule: unknown schedule 'zigzag'", 0) == 0);
}

TEST_CASE("configurations are described in the planner's words") {
  CHECK(describe(Candidate{8, 16, 8, 3, 1, 192, "interleaved", Recompute::Selective}) ==
        "tp=8, pp=16, dp=8, vpp=3, micro-batch size 1, interleaved and selective recompute");
  CHECK(describe(Candidate{2, 4, 1, 1, 2, 8, "1f1b", Recompute::None}) ==
        "tp=2, pp=4, dp=1, micro-batch size 2, 1f1b and no recompute");
}

TEST_CASE("the pipeline depths searched: at most --max-pp, and the blocks-per-rank floor") {
  // gpt3-1.3b (24 blocks) on the ideal cluster, 32 GPUs, tp 1, global batch 32: pp divides 32 and is at
  // most the 26 layers (blocks, embedding and head): 1, 2, 4, 8, 16. A floor of 2 blocks a rank keeps
  // pp x 2 <= 24: up to 8; --max-pp 4 keeps up to 4; a floor of 4 blocks keeps pp x 4 <= 24: up to 4.
  Scenario base;
  base.model = model_preset("gpt3-1.3b");
  base.cluster = cluster_preset("ideal");
  base.global_batch_size = 32;
  SearchSpace space;
  space.gpus = 32;
  space.tp = 1;
  space.schedules = {"1f1b"};
  space.recomputes = {Recompute::None};
  const auto depths = [&] {
    std::set<int> pps;
    for (const Candidate& c : enumerate_candidates(base, space)) pps.insert(c.pp);
    return pps;
  };
  CHECK(depths() == std::set<int>{1, 2, 4, 8, 16});
  space.min_blocks_per_rank = 2;
  CHECK(depths() == std::set<int>{1, 2, 4, 8});
  space.max_pp = 4;
  CHECK(depths() == std::set<int>{1, 2, 4});
  space.max_pp = 0;
  space.min_blocks_per_rank = 4;
  CHECK(depths() == std::set<int>{1, 2, 4});
  // A fixed pp deeper than either limit empties the space, and the message names both.
  space.pp = 16;
  space.max_pp = 8;
  const AnalyticCostModel cost;
  CHECK(search_error(base, space, cost) ==
        "--max-pp, --min-layers-per-stage: no pipeline degree dividing 32 GPUs / (tp x cp) and equal to 16 is at most 8 "
        "and leaves each rank 4 or more of the 24 transformer blocks of 'gpt3-1.3b'; relax them");
  space.max_pp = 0;
  CHECK(search_error(base, space, cost) ==
        "--min-layers-per-stage: no pipeline degree dividing 32 GPUs / (tp x cp) and equal to 16 leaves each rank 4 or "
        "more of the 24 transformer blocks of 'gpt3-1.3b'; relax it");
}
