// The simulation's estimate before work: the actions counted in closed form, the figures from the
// per-action constants, the message naming the options the counts came from.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "core/cluster.hpp"
#include "core/model.hpp"
#include "schedules/generators.hpp"
#include "sim/simulation_estimate.hpp"

using namespace pw;

namespace {

Scenario scenario(int pp, int vpp, int microbatches, const std::string& schedule) {
  Scenario s;
  s.model = load_model("gpt3-175b");
  s.cluster = cluster_preset("dgx-a100-80gb");
  s.parallel.pp = pp;
  s.parallel.vpp = vpp;
  s.parallel.microbatches = microbatches;
  s.schedule = schedule;
  return resolve(s);
}

}  // namespace

TEST_CASE("simulated_actions: pp x chunks x micro-batches x 3, times the iterations simulated") {
  CHECK(simulated_actions(scenario(8, 1, 16, "1f1b")) == 8 * 16 * 3);
  CHECK(simulated_actions(scenario(8, 4, 16, "interleaved")) == 8 * 4 * 16 * 3);
  CHECK(simulated_actions(scenario(4, 1, 8, "zb-v")) == 4 * 2 * 8 * 3);
  Scenario overlapped = scenario(8, 1, 16, "1f1b");
  overlapped.synchronous_optimizer = false;
  CHECK(simulated_actions(overlapped) == 8 * 16 * 3 * 4);
  // An imported schedule counts its own actions.
  Scenario imported = scenario(2, 1, 4, "1f1b");
  ScheduleSpec spec;
  spec.name = "gpipe";
  spec.ranks = 2;
  spec.microbatches = 4;
  imported.imported_schedule = make_schedule(spec);
  CHECK(simulated_actions(imported) == 2 * 4 * 2);
}

TEST_CASE("simulation_estimate: bytes and seconds per action, the observers' share on top") {
  const Scenario s = scenario(1, 1, 1000000000, "1f1b");
  const WorkEstimate plain = simulation_estimate(s, {});
  CHECK(plain.work == "3,000,000,000 actions (--pp 1 x 1 chunk x --microbatches 1000000000 x 3 for F, B and W)");
  CHECK(plain.fix == "lower --microbatches");
  CHECK(plain.bytes == Approx(3e9 * kSimBytesPerAction));
  CHECK(plain.seconds == Approx(3e9 * kSimSecondsPerAction));
  const WorkEstimate traced = simulation_estimate(s, {}, {.timeline = true, .trace = true});
  CHECK(traced.bytes == Approx(3e9 * (kSimBytesPerAction + kTimelineBytesPerAction + kTraceBytesPerAction)));
  CHECK(traced.seconds == Approx(3e9 * (kSimSecondsPerAction + kTimelineSecondsPerAction + kTraceSecondsPerAction)));
  CHECK(traced.fix == "lower --microbatches, drop --trace");
  // 300 GB against a 4 GB machine: the one-line refusal.
  CHECK(bad_input([&] { check_work("simulate", {plain}, WorkLimits{4e9, 600}); }) ==
        "simulate: 3,000,000,000 actions (--pp 1 x 1 chunk x --microbatches 1000000000 x 3 for F, B and W) would take "
        "about 300 GB; the limit is 4.00 GB of this machine's memory; lower --microbatches or pass --allow-large");
}

TEST_CASE("simulation_estimate: the micro-batches named as the user gave them") {
  Scenario s = scenario(8, 2, 4, "interleaved");
  s.global_batch_size = 16;
  s.parallel.dp = 4;
  const WorkEstimate e = simulation_estimate(s, SimulationSource{.global_batch = true, .schedule_file = ""});
  CHECK(e.work ==
        "192 actions (--pp 8 x 2 chunks x 4 micro-batches (--global-batch-size 16 / (micro-batch size 1 x dp 4)) x 3 for "
        "F, B and W)");
  CHECK(e.fix == "lower --global-batch-size");
  Scenario overlapped = scenario(2, 1, 4, "1f1b");
  overlapped.synchronous_optimizer = false;
  overlapped.imported_schedule = make_schedule(schedule_spec(overlapped));
  CHECK(simulation_estimate(overlapped, SimulationSource{.schedule_file = "plan.json"}).work ==
        "64 actions (the schedule of plan.json x 4 iterations (--no-sync-optimizer))");
}
