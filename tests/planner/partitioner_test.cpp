#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>
#include <utility>

#include "core/analytic_cost_model.hpp"
#include "core/units.hpp"
#include "partition_test_util.hpp"
#include "planner/baseline_splits.hpp"
#include "planner/partition_problem.hpp"
#include "planner/partitioner.hpp"

using namespace pw;
using namespace pw::test;

namespace {

struct Row {
  std::vector<LayerRange> ranges;
  double bottleneck = 0;
  double peak = 0;  // worst rank's simulated peak memory
  double step = 0;
  double rank_sum = 0;  // the largest sum over a rank's stages of their times (what bounds interleaved)
};

struct BruteForce {
  std::vector<Row> rows;
  // Over the splits that fit `limit`:
  double best_bottleneck = std::numeric_limits<double>::infinity();
  double best_tied_step = std::numeric_limits<double>::infinity();  // among the bottleneck-optimal ones
  double best_step = std::numeric_limits<double>::infinity();       // among all of them
  int tied = 0;
};

// Simulates every split once (memory does not change the simulated times, only which splits count).
std::vector<Row> all_splits(const Scenario& base, const CostModel& cost) {
  std::vector<Row> rows;
  // With two copies of the model (dualpipe) a split is of one copy's parts.
  const int stages = base.parallel.pp * chunks_per_rank(base.schedule, base.parallel.vpp) / model_copies(base.schedule);
  for_each_split(base.model.num_layers(), stages, [&](const std::vector<LayerRange>& ranges) {
    Scenario s = base;
    s.ranges = ranges;
    const Evaluation ev = evaluate(s, cost);
    rows.push_back(Row{ranges, bottleneck_of(ev), ev.metrics.peak_memory_bytes, ev.metrics.step_time_s, rank_sum_of(ev)});
  });
  return rows;
}

BruteForce judge(const std::vector<Row>& rows, double limit) {
  BruteForce b;
  b.rows = rows;
  for (const Row& r : rows)
    if (r.peak <= limit) {
      b.best_bottleneck = std::min(b.best_bottleneck, r.bottleneck);
      b.best_step = std::min(b.best_step, r.step);
    }
  for (const Row& r : rows)
    if (r.peak <= limit && r.bottleneck == b.best_bottleneck) {
      ++b.tied;
      b.best_tied_step = std::min(b.best_tied_step, r.step);
    }
  return b;
}

// A memory limit for trial `mode`: 0 none; 1 just below the peak of every split that is optimal
// without a limit (so the limit moves the optimum), but not below the least peak of all; 2 the
// quarter of splits with the least peak fit.
double pick_limit(const std::vector<Row>& rows, int mode) {
  if (mode == 0) return 1e18;
  double least = std::numeric_limits<double>::infinity(), best_b = least;
  for (const Row& r : rows) {
    least = std::min(least, r.peak);
    best_b = std::min(best_b, r.bottleneck);
  }
  if (mode == 1) {
    double lowest_optimal_peak = std::numeric_limits<double>::infinity();
    for (const Row& r : rows)
      if (r.bottleneck == best_b) lowest_optimal_peak = std::min(lowest_optimal_peak, r.peak);
    return std::max(least, lowest_optimal_peak - 1024);
  }
  std::vector<double> peaks;
  for (const Row& r : rows) peaks.push_back(r.peak);
  std::sort(peaks.begin(), peaks.end());
  return peaks[peaks.size() / 4];
}

struct Case {
  const char* schedule;
  int pp, vpp, microbatches;
};

// A random model of pp x vpp to 12 layers under the case's schedule, on GPUs too large to bind, and the least
// peak any of its splits reaches (the brute force).
std::pair<Scenario, double> random_case(std::mt19937& rng, const Case& c, const CostModel& cost) {
  const int n = std::uniform_int_distribution<int>(c.pp * c.vpp, 12)(rng);
  Scenario base = scenario_for(random_model(rng, n), exact_cluster(1e18), c.schedule, c.pp, c.vpp, c.microbatches);
  double least = std::numeric_limits<double>::infinity();
  for (const Row& r : all_splits(base, cost)) least = std::min(least, r.peak);
  return {std::move(base), least};
}

}  // namespace

// For every instance: every split of n <= 12 layers into the case's stages is simulated with evaluate()
// (the brute force). Among the splits whose simulated peak fits the limit, B* = the least bottleneck
// (bottleneck_of: max over stages of F + B + W + 2 (latency + bytes / bandwidth)), and S* = the least
// simulated step time among those whose bottleneck is B*. best_partition must return bottleneck B* and
// step time S* exactly (the arithmetic is exact, see partition_test_util.hpp), with a split that fits.
// One chunk per rank exercises the exact DP; interleaved and zb-v (two chunks per rank) the relaxation,
// the budget splits and the branch and bound when the limit couples a rank's chunks.
//
// Against the least step time over ALL feasible splits: the bottleneck-optimal splits are not always the
// fastest (a split with a larger bottleneck can fill and drain faster). The "[.gap]" test below measures
// it on instances like these (60 per case): the best tied split was at most 2.3% slower (1f1b p=4 m=8),
// 2.8% (1f1b p=4 m=32), 3.4% (gpipe p=3 m=3), 2.3% (zb-h1 p=4 m=8), but 19.5% (interleaved p=2 v=2
// m=4) and 22.6% (m=16) with two chunks per rank, where a chunk waits on the other rank's chunks and
// neither the stage bottleneck nor the largest per-rank sum of stage times (14.1% and 19.8%) predicts
// the simulated time well. Hence the plan ranks the tied splits by simulation, not by a formula.
//
// zb-auto is not in this list: its order is searched on each split's own stage costs and memory limit,
// so what a stage holds depends on the split; the partitioner judges its memory with the order for
// uniform stages, which can differ from the order evaluate() then builds (a known limitation).
TEST_CASE("the partitioner's split equals brute force by bottleneck and by simulated step time") {
  const AnalyticCostModel cost = exact_cost();
  const Case cases[] = {{"1f1b", 2, 1, 4},  {"1f1b", 3, 1, 6},        {"1f1b", 4, 1, 8},  {"gpipe", 3, 1, 3},
                        {"zb-h1", 4, 1, 8}, {"zb-h2", 3, 1, 6},       {"interleaved", 2, 2, 4},
                        {"bfs", 2, 2, 4},   {"zb-v", 2, 2, 4},        {"v-half", 2, 2, 4}, {"v-min", 2, 2, 4},
                        {"dualpipev", 2, 2, 4}, {"dualpipe", 2, 2, 4}, {"dualpipe", 4, 2, 8}};
  std::mt19937 rng(20240611);
  int bound_binding = 0;
  for (const Case& c : cases) {
    const int stages = c.pp * c.vpp / model_copies(c.schedule);
    for (int trial = 0; trial < 24; ++trial) {
      const int n = std::uniform_int_distribution<int>(stages, 12)(rng);
      const Model model = random_model(rng, n);
      const Scenario base = scenario_for(model, exact_cluster(1e18), c.schedule, c.pp, c.vpp, c.microbatches);
      const std::vector<Row> rows = all_splits(base, cost);
      const int mode = trial % 3;
      const double limit = pick_limit(rows, mode);
      const BruteForce bf = judge(rows, limit);
      INFO(c.schedule << " p=" << c.pp << " v=" << c.vpp << " n=" << n << " trial " << trial << " limit " << limit);
      REQUIRE(bf.tied >= 1);

      Scenario s = base;
      s.cluster = exact_cluster(limit);
      PartitionOptions all;
      all.max_ties = 1000;  // more than the 165 splits of 12 layers into 4 stages: every tied split is ranked
      all.fastest = false;  // the tied splits only (the test below searches them all)
      const PartitionResult r = best_partition(s, cost, all);
      CHECK(r.bottleneck_s == bf.best_bottleneck);
      CHECK(r.step_time_s == bf.best_tied_step);
      CHECK(r.fits);
      CHECK(r.proven_optimal);
      CHECK(r.candidates == bf.tied);
      if (c.vpp == 1) CHECK(r.tied_splits == bf.tied);
      else CHECK(r.tied_splits >= bf.tied);  // counted with each chunk's memory alone
      CHECK(r.lower_bound_s <= r.bottleneck_s);
      if (r.lower_bound_s < r.bottleneck_s) ++bound_binding;

      // The default cap ranks at most 64; with no more tied splits than that, the result is the same.
      PartitionOptions capped;
      capped.fastest = false;
      const PartitionResult d = best_partition(s, cost, capped);
      if (bf.tied <= 64) CHECK(d.step_time_s == r.step_time_s);
      CHECK(d.bottleneck_s == bf.best_bottleneck);
      CHECK(d.min_bottleneck_s == bf.best_bottleneck);

      // The split's simulated time is what evaluate() reports for it.
      Scenario chosen = s;
      chosen.ranges = r.ranges;
      const Evaluation ev = evaluate(chosen, cost);
      CHECK(ev.metrics.step_time_s == r.step_time_s);
      CHECK(ev.metrics.overflows.empty());
    }
  }
  // Some two-chunk instances must have needed the search beyond the relaxation.
  CHECK(bound_binding > 0);
}

// The default search: the least simulated step time over EVERY split that fits, as brute force finds it,
// exactly, proven by the branch and bound, never slower than the uniform or the parameters split, and
// (the point of the search) strictly faster than the best bottleneck-optimal split on some instances.
TEST_CASE("the partitioner's split has the least simulated step time of all splits, as brute force finds it") {
  const AnalyticCostModel cost = exact_cost();
  const Case cases[] = {{"1f1b", 4, 1, 16},  {"1f1b", 3, 1, 6},  {"gpipe", 3, 1, 3},       {"zb-h1", 4, 1, 8},
                        {"zb-h2", 3, 1, 6},  {"interleaved", 2, 2, 4}, {"interleaved", 2, 2, 8}, {"zb-v", 2, 2, 4},
                        {"dualpipev", 2, 2, 4}, {"dualpipe", 2, 2, 4}, {"dualpipe", 4, 2, 8}, {"dualpipe", 4, 2, 16}};
  std::mt19937 rng(20261202);
  int faster_than_tied = 0;
  long simulated = 0, splits = 0;
  for (const Case& c : cases) {
    const int stages = c.pp * c.vpp / model_copies(c.schedule);
    for (int trial = 0; trial < 12; ++trial) {
      const int n = std::uniform_int_distribution<int>(stages, 12)(rng);
      const Model model = random_model(rng, n);
      const Scenario base = scenario_for(model, exact_cluster(1e18), c.schedule, c.pp, c.vpp, c.microbatches);
      const std::vector<Row> rows = all_splits(base, cost);
      const double limit = pick_limit(rows, trial % 3);
      const BruteForce bf = judge(rows, limit);
      INFO(c.schedule << " p=" << c.pp << " v=" << c.vpp << " n=" << n << " trial " << trial << " limit " << limit);
      Scenario s = base;
      s.cluster = exact_cluster(limit);
      const PartitionResult r = best_partition(s, cost);
      CHECK(r.step_time_s == bf.best_step);
      CHECK(r.fastest_proven);
      CHECK(r.fits);
      CHECK(r.min_bottleneck_s == bf.best_bottleneck);
      CHECK(r.bottleneck_s >= r.min_bottleneck_s);
      if (bf.best_step < bf.best_tied_step) ++faster_than_tied;
      simulated += r.simulated;
      splits += static_cast<long>(rows.size());
      for (const std::vector<LayerRange>& baseline : {uniform_split(model, stages), parameters_split(model, stages)}) {
        Scenario b = s;
        b.ranges = baseline;
        const Evaluation ev = evaluate(b, cost);
        if (ev.metrics.overflows.empty()) CHECK(r.step_time_s <= ev.metrics.step_time_s);
      }
      Scenario chosen = s;
      chosen.ranges = r.ranges;
      const Evaluation ev = evaluate(chosen, cost);
      CHECK(ev.metrics.step_time_s == r.step_time_s);
      CHECK(ev.metrics.overflows.empty());
    }
  }
  CHECK(faster_than_tied > 10);
  // The bounds spare most simulations.
  CHECK(simulated * 4 < splits);
}

// Run with [.gap]: how much slower the best bottleneck-optimal split is than the fastest feasible split,
// and the same for the splits that minimise the largest per-rank sum of stage times.
TEST_CASE("gap between the best tied split and the fastest feasible split", "[.gap]") {
  const AnalyticCostModel cost = exact_cost();
  const Case cases[] = {{"1f1b", 4, 1, 8},  {"1f1b", 4, 1, 32},       {"gpipe", 3, 1, 3},
                        {"zb-h1", 4, 1, 8}, {"interleaved", 2, 2, 4}, {"interleaved", 2, 2, 16}};
  std::mt19937 rng(20240611);
  for (const Case& c : cases) {
    double worst = 0, worst_by_rank_sum = 0;
    for (int trial = 0; trial < 60; ++trial) {
      const int n = std::uniform_int_distribution<int>(c.pp * c.vpp, 12)(rng);
      const Scenario base =
          scenario_for(random_model(rng, n), exact_cluster(1e18), c.schedule, c.pp, c.vpp, c.microbatches);
      const std::vector<Row> rows = all_splits(base, cost);
      const double limit = pick_limit(rows, trial % 3);
      const BruteForce bf = judge(rows, limit);
      worst = std::max(worst, bf.best_tied_step / bf.best_step - 1);
      double least_sum = std::numeric_limits<double>::infinity(), step = least_sum;
      for (const Row& r : rows)
        if (r.peak <= limit) least_sum = std::min(least_sum, r.rank_sum);
      for (const Row& r : rows)
        if (r.peak <= limit && r.rank_sum == least_sum) step = std::min(step, r.step);
      worst_by_rank_sum = std::max(worst_by_rank_sum, step / bf.best_step - 1);
    }
    WARN(c.schedule << " p=" << c.pp << " m=" << c.microbatches << ": the best tied split is up to "
                    << format_percent(worst) << " slower than the fastest feasible one; by rank sums "
                    << format_percent(worst_by_rank_sum));
  }
}

TEST_CASE("a heavy layer sets the bottleneck and the tied splits are ranked by simulation") {
  // 7 layers of F = B = W = 1/8 s and a last layer of 15/8 s (F + B + W): with 3 stages the last layer
  // alone is the bottleneck (1.875 s; the last stage sends nothing), and the other 7 layers (3/8 s each)
  // split into two stages of at most 1.875 s with their transfer (2 x (2^-12 + 2^-20) s): 4 + 3 or 3 + 4
  // layers (5 would take 1.875 s before the transfer).
  Model m;
  m.name = "heavy-head";
  for (int i = 0; i < 7; ++i) m.layers.push_back(explicit_layer("b", 0.125, 0.125, 0.125, 1024, 1048576, 0));
  m.layers.push_back(explicit_layer("head", 0.625, 0.625, 0.625, 1024, 1048576, 0));
  const AnalyticCostModel cost = exact_cost();
  const Scenario s = scenario_for(m, exact_cluster(1e18), "1f1b", 3, 1, 6);
  const PartitionResult r = best_partition(s, cost);
  CHECK(r.bottleneck_s == 1.875);
  CHECK(r.candidates == 2);
  REQUIRE(r.ranges.size() == 3);
  CHECK(r.ranges[2].first == 7);
  // The two tied splits, simulated: the result is the faster, and the same on every run.
  double times[2];
  int k = 0;
  for (int first : {4, 3}) {
    Scenario t = s;
    t.ranges = {LayerRange{0, first - 1}, LayerRange{first, 6}, LayerRange{7, 7}};
    times[k++] = evaluate(t, cost).metrics.step_time_s;
  }
  CHECK(r.step_time_s == std::min(times[0], times[1]));
  const PartitionResult again = best_partition(s, cost);
  CHECK(again.ranges[0].last == r.ranges[0].last);
  CHECK(again.step_time_s == r.step_time_s);
}

TEST_CASE("embedding and LM head count: the head's stage takes fewer blocks") {
  // Llama-3-8B: a 128256-entry vocabulary makes the head about 2 blocks' worth of work (2 b s h V against
  // about 24 b s h^2 + ... per block), so with 4 stages the last one holds fewer blocks than the others.
  const Model m = model_preset("llama3-8b");
  Scenario s;
  s.model = m;
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.tp = 8;
  s.parallel.pp = 4;
  s.parallel.microbatches = 8;
  s.workload.seq_len = 4096;
  s = resolve(s);
  const AnalyticCostModel cost;
  const PartitionResult r = best_partition(s, cost);
  REQUIRE(r.ranges.size() == 4);
  const int last_blocks = r.ranges[3].count() - 1;  // less the head
  CHECK(last_blocks < r.ranges[1].count());
  CHECK(last_blocks < r.ranges[2].count());
  CHECK(r.fits);
}

TEST_CASE("on a mixed A100/H100 cluster the H100 stages get more layers") {
  // Two A100 nodes then two H100 nodes; tp = 8 fills a node, so pipeline ranks 0, 1 run on A100s and
  // 2, 3 on H100s (3.2x the peak, 1.6x the HBM bandwidth; a GPT-3 13B block runs about 1.75x faster).
  // The bottleneck balances time, not layers: every H100 stage holds more blocks than any A100 stage,
  // where the same model on A100s alone is split about evenly.
  const std::string text = R"({"name": "mixed", "gpus_per_node": 8,
    "node_groups": [
      {"nodes": 2, "gpu": {"name": "A100 SXM 80GB", "peak_tflops": 312, "memory_bytes": 80e9, "hbm_bytes_per_s": 2.039e12}},
      {"nodes": 2, "gpu": {"name": "H100 SXM 80GB", "peak_tflops": 989, "memory_bytes": 80e9, "hbm_bytes_per_s": 3.35e12}}],
    "intra_node": {"bandwidth_bytes_per_s": 300e9, "latency_s": 3e-6},
    "inter_node": {"bandwidth_bytes_per_s": 25e9, "latency_s": 8e-6}})";
  Scenario s;
  s.model = model_preset("gpt3-13b");
  s.cluster = cluster_from_json_text(text, "mixed.json");
  s.parallel.tp = 8;
  s.parallel.pp = 4;
  s.parallel.microbatches = 8;
  s = resolve(s);
  const AnalyticCostModel cost;
  const PartitionResult r = best_partition(s, cost);
  REQUIRE(r.ranges.size() == 4);
  auto blocks = [&](const std::vector<LayerRange>& ranges, int st) {
    int n = 0;
    for (int i = ranges[st].first; i <= ranges[st].last; ++i) n += s.model.layers[i].kind == LayerKind::Block;
    return n;
  };
  const int a100_most = std::max(blocks(r.ranges, 0), blocks(r.ranges, 1));
  const int h100_least = std::min(blocks(r.ranges, 2), blocks(r.ranges, 3));
  CHECK(h100_least > a100_most);
  CHECK(blocks(r.ranges, 2) * 2 >= 3 * a100_most);

  Scenario same = s;
  same.cluster = cluster_preset("dgx-a100-80gb");
  same.cluster.nodes = 4;
  const PartitionResult u = best_partition(resolve(same), cost);
  const int spread = std::max({blocks(u.ranges, 0), blocks(u.ranges, 1), blocks(u.ranges, 2), blocks(u.ranges, 3)}) -
                     std::min({blocks(u.ranges, 0), blocks(u.ranges, 1), blocks(u.ranges, 2), blocks(u.ranges, 3)});
  CHECK(spread <= 3);

  // The simulator charges each stage on its own GPU type, as the partitioner does.
  Scenario chosen = s;
  chosen.ranges = r.ranges;
  const Evaluation ev = evaluate(chosen, cost);
  CHECK(ev.metrics.step_time_s == r.step_time_s);
  CHECK(ev.stages[2].cost.forward_s / blocks(r.ranges, 2) < ev.stages[1].cost.forward_s / blocks(r.ranges, 1) / 1.5);
}

TEST_CASE("a skip edge across the middle moves the cut") {
  // 8 layers of 1 s each (F only), 2 stages. As a chain the cut is in the middle (4 + 4 layers: 4 s plus
  // a 1 KiB transfer). An edge 2 -> 5 of 2^31 bytes (2 s each way on the 2^30 B/s link) crosses the
  // boundaries after layers 2, 3 and 4: any cut there costs its stage 0 at least 3 + 4 s. The cut after
  // layer 1 gives stage 0 2 s + small and stage 1 6 s; the cut after layer 5 gives stage 0 6 s + small:
  // the split is {0..1}, {2..7} with bottleneck 6 s.
  Model m;
  m.name = "skip";
  for (int i = 0; i < 8; ++i) m.layers.push_back(explicit_layer("l", 1, 0, 0, 1024, 1024, 0));
  const AnalyticCostModel cost = exact_cost();
  const PartitionResult chain = best_partition(scenario_for(m, exact_cluster(1e18), "1f1b", 2, 1, 4), cost);
  CHECK(chain.ranges[0].last == 3);
  CHECK(chain.bottleneck_s == 4 + 2 * (kLatency + 1024 / kBandwidth));

  m.edges.push_back(LayerEdge{2, 5, 2147483648.0});
  const Scenario s = scenario_for(m, exact_cluster(1e18), "1f1b", 2, 1, 4);
  const PartitionResult graph = best_partition(s, cost);
  CHECK(graph.ranges[0].last == 1);
  CHECK(graph.bottleneck_s == 6);
  // The simulator relays the edge too: stage 0's boundary carries only layer 1's output here.
  Scenario chosen = s;
  chosen.ranges = graph.ranges;
  const Evaluation ev = evaluate(chosen, cost);
  CHECK(ev.stages[0].cost.output_bytes == 1024);
  CHECK(ev.metrics.step_time_s == graph.step_time_s);
}

TEST_CASE("no split that fits: the smallest stage's need, exactly") {
  // 4 layers of 2^30 activation bytes, no weights, 1f1b with p = 2 and m = 4: rank 0 holds 2 micro-batches,
  // rank 1 one. Splits 1+3: ranks need 2 and 3 GiB; 2+2: 4 and 2; 3+1: 6 and 1. The least worst rank is
  // 3 GiB = 3.22 GB, over a 2^31-byte (2.15 GB) GPU.
  Model m;
  m.name = "fat";
  for (int i = 0; i < 4; ++i) m.layers.push_back(explicit_layer("l", 1.0 / 8, 0, 0, 1024, 1073741824.0, 0));
  const AnalyticCostModel cost = exact_cost();
  const Scenario s = scenario_for(m, exact_cluster(2147483648.0), "1f1b", 2, 1, 4);
  CHECK(bad_input([&] { best_partition(s, cost); }) ==
        "the smallest stage needs 3.22 GB with tp=1, pp=2 and recompute none; a plan may use 2.15 GB; use a larger --tp or "
        "--pp, --recompute full, or GPUs with more memory");
  const MemoryNeed need = smallest_memory_need(s, cost);
  CHECK(need.need_bytes == 3 * 1073741824.0);
  CHECK(need.rank == 1);
  CHECK(need.exact);

  // Two chunks per rank: interleaved p = 2, v = 2, m = 4, one layer per stage (the split is forced).
  // Rank 0 runs 0F0 0F1 2F0 2F1 0F2 2BW0 0F3 ... (tests/golden/schedules/interleaved-p2-m4-v2.txt): after
  // 0F2 it holds 5 activation sets (3 of chunk 0, 2 of chunk 1), 5 GiB = 5.37 GB; rank 1 at most 3.
  const Scenario v = scenario_for(m, exact_cluster(2147483648.0), "interleaved", 2, 2, 4);
  const MemoryNeed vn = smallest_memory_need(v, cost);
  CHECK(vn.exact);
  CHECK(vn.rank == 0);
  CHECK(vn.need_bytes == 5 * 1073741824.0);
  CHECK(bad_input([&] { best_partition(v, cost); }) ==
        "the smallest stage needs 5.37 GB with tp=1, pp=2, vpp=2 and recompute none; a plan may use 2.15 GB; use a "
        "larger --tp or --pp, --recompute full, or GPUs with more memory");
}

TEST_CASE("the smallest memory need equals brute force") {
  // need_bytes = min over all splits of the worst rank's simulated peak (one GPU type: the least excess
  // is the least peak), for one chunk per rank (the DP) and two (the search).
  const AnalyticCostModel cost = exact_cost();
  const Case cases[] = {{"1f1b", 4, 1, 8}, {"zb-h1", 3, 1, 6}, {"interleaved", 2, 2, 4}, {"bfs", 2, 2, 4},
                        {"zb-v", 2, 2, 4}, {"dualpipev", 2, 2, 4}, {"dualpipe", 4, 2, 8}};
  std::mt19937 rng(7);
  for (const Case& c : cases)
    for (int trial = 0; trial < 12; ++trial) {
      const auto [base, least] = random_case(rng, c, cost);
      INFO(c.schedule << " layers " << base.model.layers.size() << " trial " << trial);
      Scenario tight = base;
      tight.cluster = exact_cluster(least - 1024);  // nothing fits
      const MemoryNeed need = smallest_memory_need(tight, cost);
      CHECK(need.need_bytes == least);
      CHECK(need.exact);
      CHECK(bad_input([&] { best_partition(tight, cost); }).rfind("the smallest stage needs " + format_bytes(least), 0) == 0);
      Scenario loose = base;
      loose.cluster = exact_cluster(least);  // the least split fits
      CHECK(best_partition(loose, cost).fits);
    }
}

TEST_CASE("the search's question, whether any split fits, answers as brute force does") {
  // The plan search names no need (explain_no_fit off): with several chunks per rank the partitioner then stops
  // at the first split that fits instead of the least. On the GPU the least split needs, a split fits; a KiB less,
  // none does.
  const AnalyticCostModel cost = exact_cost();
  const Case cases[] = {{"interleaved", 2, 2, 4}, {"bfs", 2, 2, 4}, {"zb-v", 2, 2, 4}, {"dualpipev", 2, 2, 4},
                        {"interleaved", 3, 2, 6}, {"dualpipe", 4, 2, 8}};
  std::mt19937 rng(11);
  PartitionOptions search;
  search.explain_no_fit = false;
  for (const Case& c : cases)
    for (int trial = 0; trial < 12; ++trial) {
      const auto [base, least] = random_case(rng, c, cost);
      INFO(c.schedule << " p=" << c.pp << " layers " << base.model.layers.size() << " trial " << trial);
      Scenario tight = base;
      tight.cluster = exact_cluster(least - 1024);
      CHECK(bad_input([&] { best_partition(tight, cost, search); }) == "no split fits in memory");
      Scenario loose = base;
      loose.cluster = exact_cluster(least);
      CHECK(best_partition(loose, cost, search).fits);
    }
}

TEST_CASE("the brief's example: GPT-3 175B that does not fit reports GB with its settings") {
  // GPT-3 175B with tp = 8, pp = 2 on 80 GB A100s: stage 0 holds the embedding (V h + s h = 643 M
  // parameters) and 48 blocks of 12 h^2 + 13 h = 1.812 B, 87.6 B parameters, 10.95 B per GPU (norms
  // aside); at 18 bytes each (dp = 1) 197 GB of model state, plus the 3 GB reserve, plus full-recompute
  // activations (2 s b h / t per layer and micro-batch, 2 micro-batches in flight: 0.6 GB): 201 GB.
  Scenario s;
  s.model = model_preset("gpt3-175b");
  s.cluster = cluster_preset("dgx-a100-80gb");
  s.parallel.tp = 8;
  s.parallel.pp = 2;
  s.parallel.microbatches = 4;
  s.workload.recompute = Recompute::Full;
  s = resolve(s);
  const AnalyticCostModel cost;
  CHECK(bad_input([&] { best_partition(s, cost); }) ==
        "the smallest stage needs 201 GB with tp=8, pp=2 and recompute full; a plan may use 83.3 GB (85.0 GB less the 2% "
        "headroom); use a larger --tp or --pp, or GPUs with more memory, or a smaller --memory-headroom");
  const MemoryNeed need = smallest_memory_need(s, cost);
  CHECK(need.need_bytes == Approx(197e9 + 3e9 + 0.6e9).epsilon(0.005));
}

// The problem's rank memory is the simulator's peak: with DeepSeek-V3's MTP module, whose rank holds the embedding
// under DualPipeV's V and under DualPipe's two copies (the rank pairs: the larger of the two ranks' peaks), and
// without it on 1F1B, where the embedding's rank holds no MTP. Every split of the blocks a few ways.
TEST_CASE("the partition problem's rank memory is the simulated peak, DeepSeek-V3's shared MTP embedding included") {
  const AnalyticCostModel cost;
  const Model model = load_model(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/deepseek-v3.config.json");
  REQUIRE(model.layers.at(model.layers.size() - 2).kind == LayerKind::Mtp);
  std::mt19937 rng(61);
  for (const Case& c : {Case{"dualpipe", 4, 2, 8}, Case{"dualpipev", 2, 2, 4}, Case{"1f1b", 4, 1, 4}}) {
    Scenario s = scenario_for(model, cluster_preset("dgx-h800"), c.schedule, c.pp, c.vpp, c.microbatches);
    s.workload.recompute = Recompute::Full;
    s = resolve(s);
    const Schedule schedule = make_schedule(schedule_spec(s));
    const PartitionProblem p = make_partition_problem(s, cost, schedule);
    CHECK(p.copies == schedule.copies);
    CHECK(p.ranks == (c.pp / schedule.copies));
    for (int trial = 0; trial < 4; ++trial) {
      // Random cuts between the blocks (the embedding first, the MTP module and head last).
      std::vector<int> cuts;
      for (int k = 1; k < p.stages; ++k) cuts.push_back(std::uniform_int_distribution<int>(1, p.layers - 1)(rng));
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      if (static_cast<int>(cuts.size()) != p.stages - 1) continue;
      std::vector<LayerRange> ranges;
      int begin = 0;
      for (int end : cuts) {
        ranges.push_back({begin, end - 1});
        begin = end;
      }
      ranges.push_back({begin, p.layers - 1});
      Scenario split = s;
      split.ranges = ranges;
      const Evaluation ev = evaluate(split, cost);
      INFO(c.schedule << " trial " << trial);
      for (int r = 0; r < p.ranks; ++r) {
        double simulated = ev.sim.ranks.at(static_cast<size_t>(r)).peak_memory_bytes;
        if (p.copies == 2) simulated = std::max(simulated, ev.sim.ranks.at(static_cast<size_t>(c.pp - 1 - r)).peak_memory_bytes);
        CHECK(p.rank_memory(r, ranges) == Approx(simulated).epsilon(1e-9));
      }
    }
  }
}
