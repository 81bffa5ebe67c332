// The simulated trace shows each stage's data-parallel gradient reduction with its bytes and each rank's
// optimizer step as events of their own.
#include <catch2/catch.hpp>

#include <map>

#include "core/analytic_cost_model.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/scenario.hpp"

using namespace pw;
using nlohmann::json;

TEST_CASE("the simulated trace carries the reductions' bytes and the optimizer steps") {
  Scenario s;
  s.model = model_preset("gpt3-1.3b");
  s.cluster = cluster_preset("dgx-a100-80gb");
  s.parallel.pp = 2;
  s.parallel.dp = 2;
  s.parallel.microbatches = 4;
  s.parallel.zero = 0;
  s.schedule = "1f1b";
  ChromeTraceWriter writer;
  const Evaluation ev = evaluate(s, AnalyticCostModel(), &writer);
  const json trace = writer.trace();

  std::map<int, double> reduced_bytes;  // by stage
  std::map<int, json> optimizer;        // by rank
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    // One slice per gradient bucket: their bytes add up to the stage's.
    if (e["cat"] == "collective") reduced_bytes[e["args"]["stage"].get<int>()] += e["args"]["bytes"].get<double>();
    if (e["cat"] == "optimizer") {
      CHECK(optimizer.count(e["pid"].get<int>()) == 0);
      optimizer[e["pid"].get<int>()] = e;
    }
  }
  // Each stage's fp32 gradients, 4 bytes a parameter, all-reduced over dp.
  REQUIRE(reduced_bytes.size() == 2);
  for (const StageReport& st : ev.stages) {
    CHECK(st.cost.grad_reduce_bytes == 4 * st.cost.parameters);
    CHECK(reduced_bytes[st.stage] == st.cost.grad_reduce_bytes);
  }
  // One step per rank, as long as its stages' optimizer_s; the synchronous steps start together, and the
  // longest ends the iteration.
  REQUIRE(optimizer.size() == 2);
  double end_us = 0;
  for (const StageReport& st : ev.stages) {
    const json& e = optimizer[st.rank];
    CHECK(e["name"] == "optimizer step");
    CHECK(e["tid"] == 4);
    CHECK(e["args"]["op"] == "optimizer_step");
    CHECK_FALSE(e["args"].contains("bytes"));
    CHECK(e["dur"].get<double>() == Approx(st.cost.optimizer_s * 1e6).margin(1e-3));
    CHECK(e["ts"] == optimizer[0]["ts"]);
    end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
  }
  CHECK(end_us == Approx(ev.sim.step_time_s * 1e6).margin(1e-2));

  // Without data parallelism there is nothing to reduce: no collective events, the optimizer steps remain.
  s.parallel.dp = 1;
  ChromeTraceWriter single;
  const Evaluation one = evaluate(s, AnalyticCostModel(), &single);
  int collectives = 0, steps = 0;
  const json single_trace = single.trace();
  for (const json& e : single_trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    collectives += e["cat"] == "collective";
    steps += e["cat"] == "optimizer";
  }
  CHECK(collectives == 0);
  CHECK(steps == 2);
  CHECK(one.stages[0].cost.grad_reduce_bytes == 0);
}
