// The measured trace is the simulator's schema: the same slices, lanes, flows and counters, with measured times.
#include <catch2/catch.hpp>

#include <set>

#include "executor/measured_trace.hpp"
#include "executor/sleep_backend.hpp"
#include "schedules/generators.hpp"
#include "sim/chrome_trace.hpp"

using namespace pw;
using nlohmann::json;

namespace {

std::set<std::string> keys_of(const json& o) {
  std::set<std::string> k;
  for (auto it = o.begin(); it != o.end(); ++it) k.insert(it.key());
  return k;
}

std::tuple<int, int, std::string> slice(const json& e) {
  return {e["pid"].get<int>(), e["tid"].get<int>(), e["name"].get<std::string>()};
}

}  // namespace

TEST_CASE("a measured trace has the simulated trace's events, fields and flows") {
  StageCost c;
  c.forward_s = 1e-4;
  c.backward_input_s = 2e-4;
  c.backward_weight_s = 0;
  c.activation_bytes = 1000;
  c.output_bytes = 64;
  c.optimizer_s = 5e-5;
  const std::vector<StageCost> costs(2, c);
  const Schedule s = make_schedule(ScheduleSpec{"1f1b", 2, 3});
  SleepBackend backend(costs);
  const RunResult r = run_schedule(s, backend);
  const json measured = measured_trace(r.iterations[0], costs, backend.name(), {{"schedule", "1f1b"}});

  ChromeTraceWriter sim_writer;
  SimInput in;
  in.schedule = s;
  in.stages = costs;
  in.cluster.ideal = true;
  simulate(in, &sim_writer);
  const json simulated = sim_writer.trace();

  CHECK(measured["otherData"]["tool"].get<std::string>().find("executor (sleep)") != std::string::npos);
  CHECK(measured["otherData"]["schedule"] == "1f1b");
  CHECK(measured["otherData"]["step_time_s"] == r.iterations[0].step_time_s);
  CHECK(keys_of(measured) == keys_of(simulated));

  // The same multiset of (rank, lane, name) slices, and the same fields on each kind of event.
  std::multiset<std::tuple<int, int, std::string>> sim_slices, run_slices;
  std::map<std::string, std::set<std::string>> sim_fields, run_fields;
  std::map<long, int> flow_ends;
  for (const json& e : simulated["traceEvents"]) {
    if (e["ph"] == "X") sim_slices.insert(slice(e));
    sim_fields[e["ph"].get<std::string>()] = keys_of(e);
  }
  int optimizer_steps = 0;
  for (const json& e : measured["traceEvents"]) {
    if (e["ph"] == "X") {
      run_slices.insert(slice(e));
      if (e["cat"] == "compute") {
        const std::string name = e["name"];
        CHECK(e["args"]["predicted_us"] == (name.find("BW") != std::string::npos ? 200.0 : 100.0));
        CHECK(e["args"]["measured_us"].get<double>() >= e["args"]["predicted_us"].get<double>() - 0.01);
      }
      // Each rank's optimizer step, an event of its own beside its prediction (one stage's optimizer_s).
      if (e["cat"] == "optimizer") {
        ++optimizer_steps;
        CHECK(e["name"] == "optimizer step");
        CHECK(e["args"]["predicted_us"] == 50.0);
        CHECK(e["args"].contains("measured_us"));
      }
    }
    if (e["ph"] == "s" || e["ph"] == "f") flow_ends[e["id"].get<long>()] += e["ph"] == "s" ? 1 : 10;
    run_fields[e["ph"].get<std::string>()] = keys_of(e);
  }
  CHECK(optimizer_steps == 2);
  CHECK(run_slices == sim_slices);
  CHECK(run_fields == sim_fields);
  CHECK(flow_ends.size() == 6);  // 3 forward and 3 backward transfers, each with its two ends
  for (const auto& [id, ends] : flow_ends) CHECK(ends == 11);
}
