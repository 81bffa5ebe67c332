// The host's floor under MoE blocks (AnalyticCostParams::moe_host_s): each phase of a block with routed experts
// takes at least its share of the host's time, shared by kernel launches; an F&B composite at least both
// halves' host time. (A profiled layer's: tests/profiler/profiled_lookup_test.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "core/stage_costs.hpp"
#include "schedules/generators.hpp"
#include "schedules/timing.hpp"
#include "../error_text.hpp"

using namespace pw;

namespace {

AnalyticCostModel with_host(double seconds) {
  AnalyticCostParams p;
  p.moe_host_s = seconds;
  return AnalyticCostModel(p);
}

// Qwen3-30B-A3B on 16 H100s, ep 16, one sequence of 4096 tokens per micro-batch: the published run whose
// MoE blocks the host cannot keep up with (docs/validation.md).
struct Qwen3Block {
  Model model = model_preset("qwen3-30b-a3b");
  Cluster cluster = cluster_preset("dgx-h100");
  ParallelConfig pc;
  Workload w;
  Qwen3Block() {
    pc.dp = 16;
    pc.ep = 16;
    pc.order = RankOrder::TpDpPp;
    w.seq_len = 4096;
    w.ep = 16;
    w.precision = Precision::Fp8;
    w.dispatcher = Workload::Dispatcher::Flex;  // HybridEP, as the benchmark ran
  }
  const Layer& block() const { return model.layers[static_cast<size_t>(model.block_index(0))]; }
  LayerWork work(Recompute r = Recompute::None) const {
    Workload x = w;
    x.recompute = r;
    return layer_work(model, block(), x);
  }
};

}  // namespace

TEST_CASE("a MoE block's phases take their share of the host's time, by kernel launches") {
  const Qwen3Block q;
  const LayerWork lw = q.work();
  const AnalyticCostModel cost = with_host(9e-3);
  const double f = lw.forward.kernels, b = lw.backward_input.kernels, w = lw.backward_weight.kernels;
  CHECK(f == 16);
  CHECK(b == 14);
  CHECK(w == 5);
  CHECK(cost.host_time(q.block(), lw, Phase::Forward, 1) == Approx(9e-3 * 16 / 35));
  CHECK(cost.host_time(q.block(), lw, Phase::BackwardInput, 1) == Approx(9e-3 * 14 / 35));
  CHECK(cost.host_time(q.block(), lw, Phase::BackwardWeight, 1) == Approx(9e-3 * 5 / 35));
  // Recomputation reruns the forward's launches before B: the host issues them again.
  const LayerWork full = q.work(Recompute::Full);
  REQUIRE(full.recompute.kernels > 0);
  CHECK(cost.host_time(q.block(), full, Phase::BackwardInput, 1) ==
        Approx(9e-3 * (full.recompute.kernels + full.backward_input.kernels) / 35));
  // Layers without routed experts, and the default-off switch, have none.
  const Layer& head = q.model.layers.back();
  CHECK(cost.host_time(head, layer_work(q.model, head, q.w), Phase::Forward, 1) == 0);
  const Model dense = model_preset("llama3-8b");
  const Layer& dense_block = dense.layers[static_cast<size_t>(dense.block_index(0))];
  CHECK(cost.host_time(dense_block, layer_work(dense, dense_block, q.w), Phase::Forward, 1) == 0);
  CHECK(with_host(0).host_time(q.block(), lw, Phase::Forward, 1) == 0);
}

TEST_CASE("a phase runs at the pace of the slower of the GPU and the host") {
  const Qwen3Block q;
  const LayerWork lw = q.work();
  const GroupLinks links = group_links(q.cluster, q.pc, 0);
  const AnalyticCostModel gpu_only = with_host(0);
  for (double host : {1e-3, 9e-3, 30e-3}) {
    const AnalyticCostModel cost = with_host(host);
    for (Phase phase : {Phase::Forward, Phase::BackwardInput, Phase::BackwardWeight}) {
      const double gpu = layer_phase_time(gpu_only, q.block(), lw, phase, q.cluster.gpu, links, 1);
      CHECK(layer_phase_time(cost, q.block(), lw, phase, q.cluster.gpu, links, 1) ==
            std::max(gpu, cost.host_time(q.block(), lw, phase, 1)));
    }
  }
  // At 9 ms a block, the forward of one 4096-token sequence is host-bound: 16 of its 35 launches.
  const double forward_gpu = layer_phase_time(gpu_only, q.block(), lw, Phase::Forward, q.cluster.gpu, links, 1);
  CHECK(forward_gpu < 9e-3 * 16 / 35);
  CHECK(layer_phase_time(with_host(9e-3), q.block(), lw, Phase::Forward, q.cluster.gpu, links, 1) ==
        Approx(9e-3 * 16 / 35));
}

TEST_CASE("a stage sums its layers' host time, and an F&B composite takes at least both halves'") {
  const Qwen3Block q;
  const AnalyticCostModel cost = with_host(9e-3);
  const std::vector<LayerRange> ranges = split_layers(q.model, 1, {});
  const std::vector<StageCost> sc = stage_costs(q.model, ranges, q.w, q.pc, q.cluster, cost, {0});
  // 48 MoE blocks, 9 ms each over their three phases; the embedding and head none.
  CHECK(sc[0].host_forward_s == Approx(48 * 9e-3 * 16 / 35));
  CHECK(sc[0].host_backward_s == Approx(48 * 9e-3 * 19 / 35));
  CHECK(sc[0].forward_s >= sc[0].host_forward_s);

  // In the schedule's own timing: F 4 s (1 s all-to-all), B + W 5 s (2 s): 6 s on the GPU, but the host
  // needs 4 + 5 s to issue both halves.
  const Schedule s = make_schedule({"dualpipev", 2, 8});
  StageTimes t = StageTimes::uniform(4, 4, 3, 2);
  t.comm_f.assign(4, 1);
  t.comm_b.assign(4, 2);
  t.host_f.assign(4, 4);
  t.host_b.assign(4, 5);
  const ScheduleTiming timing = asap_timing(s, t);
  int composites = 0;
  for (size_t r = 0; r < s.ranks.size(); ++r)
    for (size_t i = 0; i < s.ranks[r].size(); ++i)
      if (s.ranks[r][i].op == Op::FB) {
        CHECK(timing.end[r][i] - timing.start[r][i] == 9);
        ++composites;
      }
  CHECK(composites > 0);
  t.host_b = {5};
  CHECK(bad_input([&] { asap_timing(s, t); }) == "stage times: host_f and host_b need one time per stage (4), got 4 and 1");
}

TEST_CASE("moe_host_s is a cost parameter, and a negative one is refused") {
  AnalyticCostParams p;
  set_param(p, "moe_host_s=0.004");
  CHECK(p.moe_host_s == 0.004);
  p.moe_host_s = -1;
  CHECK(bad_input([&] { validate(p); }) == "cost model: moe_host_s = -1 is negative or not finite; give a value >= 0");
}
