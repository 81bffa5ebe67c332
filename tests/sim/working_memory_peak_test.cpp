// The simulator's peak memory counts the working set of the layer being computed on top of what is held.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/analytic_cost_model.hpp"
#include "core/layer_work.hpp"
#include "sim/scenario.hpp"

using namespace pw;

TEST_CASE("a rank's peak memory is its model state, activation peak and its stages' largest working set") {
  Scenario sc;
  sc.model = model_preset("gpt3-13b");
  sc.cluster = cluster_preset("dgx-a100-80gb");
  sc.parallel.pp = 4;
  sc.parallel.tp = 2;
  sc.workload.tp = 2;
  sc.parallel.microbatches = 8;
  sc.schedule = "1f1b";
  const Evaluation ev = evaluate(sc, AnalyticCostModel());
  for (const RankStats& r : ev.sim.ranks) {
    double working = 0;
    for (const StageReport& st : ev.stages)
      if (st.rank == r.rank) working = std::max(working, st.cost.working_bytes);
    CHECK(working > 0);
    CHECK(r.working_bytes == working);
    CHECK(r.peak_memory_bytes == r.model_state_bytes + r.activation_peak_bytes + r.working_bytes);
  }
  // The last stage holds the head, whose logits (vocabulary 51200) outweigh a block's MLP gradient.
  const Workload w = resolve(sc).workload;
  CHECK(ev.sim.ranks.back().working_bytes == layer_work(sc.model, sc.model.layers.back(), w).working_bytes);
}
