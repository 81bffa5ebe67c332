// calibrate() end to end on synthetic measurements from known parameters: the run overheads come back,
// held-out shapes and runs are predicted better after than before, and bad data is rejected by name.
#include <catch2/catch.hpp>

#include <cmath>

#include "../error_text.hpp"
#include "calibrate/calibrate.hpp"
#include "calibrate/link_fit.hpp"
#include "core/json_text.hpp"
#include "synthetic.hpp"

namespace {

using synth::Fixture;
using synth::fixture;
using synth::scenario;
using synth::tiny;
using synth::truth_overheads;

double error_pct(double predicted, double measured) { return std::abs(predicted - measured) / measured * 100; }

}  // namespace

TEST_CASE("traces recover the compute slowdown during transfers, which the simulator then charges") {
  // Runs simulated with the truth plus transfer_slowdown 0.3: every transfer is in flight for at least
  // transfer_s = 300 us, so compute on both ends overlaps it often. The per-action rows of the traces
  // (exact, no noise) give back the compute scale, the dispatch and the slowdown within 2%, and the runs
  // simulated again with the fitted model match their step times within 1%: without the slowdown charged,
  // the fitted model would be short on every run whose compute overlaps its transfers.
  const pw::Model m = tiny("tiny-llama.json");
  const synth::Truth t;
  const std::string profile = synth::write("slowdown-synthetic-profile.json",
                                           pw::profile_to_json_text(synth::profile(m, {1, 2, 4, 8}, {32}, t, 0.0, 3)));
  pw::RunOverheads slowed = truth_overheads();
  slowed.transfer_slowdown = 0.3;
  const pw::AnalyticCostModel analytic;
  const pw::CalibratedCostModel truth(synth::truth_calibration(t, slowed), analytic);
  const std::vector<pw::Scenario> scenarios = {scenario(m, "1f1b", 2, 1, 8, 1), scenario(m, "gpipe", 2, 1, 4, 2),
                                               scenario(m, "zb-h1", 4, 1, 8, 1), scenario(m, "interleaved", 2, 2, 4, 2)};
  pw::CalibrateInputs in;
  in.profile = profile;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    in.runs.push_back(synth::run_file(fmt::format("slowdown-run{}.json", i + 1), scenarios[i], truth, 0.0, 200 + i));
    in.traces.push_back(synth::trace_file(fmt::format("slowdown-trace{}.json", i + 1), scenarios[i], truth));
  }
  const pw::Calibration c = pw::calibrate(in);
  INFO(pw::calibration_to_json_text(c));
  const pw::RunOverheads& o = c.overheads;
  CHECK(o.compute_scale == Approx(1.10).epsilon(0.02));
  CHECK(o.dispatch_s == Approx(100e-6).epsilon(0.02));
  CHECK(o.transfer_slowdown == Approx(0.3).epsilon(0.02));
  CHECK(o.step_quality.max_error_pct < 1.0);
}

TEST_CASE("calibrate recovers the run overheads and predicts held-out data better than before") {
  const Fixture f = fixture("recovers");
  pw::CalibrateInputs in;
  in.profile = f.profile;
  in.runs = f.runs;
  in.holdout = 0.25;
  const pw::Calibration c = pw::calibrate(in);
  INFO(pw::calibration_to_json_text(c));

  // Held out: b = 8 (the largest of 4 micro-batch shapes) and the last round(0.25 x 7) = 2 runs.
  CHECK(c.measured.size() == 9);
  REQUIRE(c.held_out_layers.size() == 9);
  REQUIRE(c.held_out_runs.size() == 2);
  CHECK(c.runs[4].held_out == false);
  CHECK(c.runs[5].held_out);
  CHECK(c.analytic_gpu == "H100 SXM 80GB");

  // Overheads from +-0.2% noisy runs on a +-1% noisy profile: compute scale within 1%, transfer cost within
  // 10%, dispatch within 20% (it is 1-3% of a rank's busy time, and absorbs what the layer fit got wrong:
  // over four noise seeds it came back 11-13% high, the transfer cost within 4%).
  const pw::RunOverheads& o = c.overheads;
  CHECK(o.fitted);
  CHECK(o.compute_scale == Approx(1.10).epsilon(0.01));
  CHECK(o.dispatch_s == Approx(100e-6).epsilon(0.20));
  CHECK(o.transfer_s == Approx(300e-6).epsilon(0.10));
  CHECK(o.transfer_slowdown == 0);  // no traces: nothing to fit it on
  CHECK(o.step_quality.points == 5);
  CHECK(o.step_quality.max_error_pct < 1.5);

  // Held-out layers at b = 8 from the fit on b = 1, 2, 4: within 3%; the analytic defaults (an H100 for a
  // synthetic CPU) are far off.
  for (const pw::HeldOutPoint& p : c.held_out_layers) {
    INFO(p.what);
    CHECK(error_pct(p.calibrated_s, p.measured_s) < 3.0);
    CHECK(error_pct(p.calibrated_s, p.measured_s) < error_pct(p.analytic_s, p.measured_s));
  }
  // Held-out runs: within 2% after; before, the profile alone misses the 10% compute scale and the
  // overheads, the analytic defaults everything.
  for (const pw::HeldOutPoint& p : c.held_out_runs) {
    INFO(p.what);
    CHECK(error_pct(p.calibrated_s, p.measured_s) < 2.0);
    CHECK(error_pct(p.profiled_s, p.measured_s) > 5.0);
    CHECK(error_pct(p.analytic_s, p.measured_s) > 50.0);
  }
}

TEST_CASE("calibrate without runs fits layers and links only") {
  const Fixture f = fixture("holdout");
  pw::CalibrateInputs in;
  in.profile = f.profile;
  const pw::Calibration c = pw::calibrate(in);
  CHECK(!c.overheads.fitted);
  CHECK(c.overheads.compute_scale == 1);
  CHECK(c.layers.size() == 9);
  REQUIRE(c.link);
  // Link samples at 1 KiB..64 MiB, +-1% noise around 30 us + size / 4 GB/s.
  CHECK(c.link->latency_s == Approx(30e-6).epsilon(0.05));
  CHECK(c.link->bandwidth_bytes_per_s == Approx(4e9).epsilon(0.02));
  CHECK(c.held_out_layers.empty());
  CHECK(c.analytic_gpu.empty());
  // One sequence length only: FLOPs and bytes grow together, so two parameters per fit are identified.
  CHECK(c.warnings.empty());
}

TEST_CASE("calibrate rejects bad or insufficient data by name") {
  const Fixture f = fixture("bad");
  const pw::Model m = tiny("tiny-llama.json");
  const synth::Truth t;
  auto with_runs = [&](std::vector<std::string> runs) {
    pw::CalibrateInputs in;
    in.profile = f.profile;
    in.runs = std::move(runs);
    return bad_input([&] { pw::calibrate(in); });
  };
  // A NaN step time is written as null.
  nlohmann::json run = nlohmann::json::parse(pw::read_text_file(f.runs[0], "run"));
  run["measured_step_time_s"] = std::nan("");
  const std::string nan_run = synth::write("nan-run.json", run.dump());
  CHECK(with_runs({nan_run}) == "--runs: " + nan_run +
                                    ": measured_step_time_s is missing or null (a NaN timing); the run measured nothing "
                                    "usable: run it again");
  run = nlohmann::json::parse(pw::read_text_file(f.runs[0], "run"));
  run["ranks"][1]["busy_s"] = -1;
  const std::string negative = synth::write("negative-run.json", run.dump());
  CHECK(with_runs({negative}) ==
        "--runs: " + negative + ": ranks[1].busy_s is -1; a measured time must be positive: run it again");
  run.erase("scenario");
  const std::string old = synth::write("old-run.json", run.dump());
  CHECK(with_runs({old}) == "--runs: " + old +
                                ": scenario is missing: this is not `pipewright run --json` output of this version; run it "
                                "again with --json");
  const std::string malformed = synth::write("malformed-run.json", "{\"ranks\": [");
  CHECK(with_runs({malformed}) == "--runs: " + malformed +
                                      ": malformed JSON at byte 12: syntax error while parsing value - unexpected end of "
                                      "input; expected '[', '{', or a literal");

  // A run of another model.
  const pw::AnalyticCostModel analytic;
  const pw::CalibratedCostModel truth(synth::truth_calibration(t, truth_overheads()), analytic);
  const std::string gpt = synth::run_file("gpt-run.json", scenario(tiny("tiny-gpt.json"), "1f1b", 2, 1, 4, 1), truth, 0, 1);
  CHECK(with_runs({gpt}) == gpt + ": the embedding layer of model 'tiny-gpt' (hidden=64 vocab=256 positions=learned) is "
                                  "not in " + f.profile + "; calibrate on runs of the profiled model");
  // A run that waited the predicted times.
  run = nlohmann::json::parse(pw::read_text_file(f.runs[0], "run"));
  run["compute"] = "sleep";
  const std::string sleep = synth::write("sleep-run.json", run.dump());
  CHECK(with_runs({sleep}) == sleep + ": compute is \"sleep\": its actions waited the predicted times; calibrate on runs "
                                      "with --compute real");

  // The profile: one micro-batch size; a holdout that leaves too little; traces that do not pair up.
  pw::CalibrateInputs one;
  one.profile = synth::write("one-size-profile.json", pw::profile_to_json_text(synth::profile(m, {4}, {32}, t, 0, 1)));
  CHECK(bad_input([&] { pw::calibrate(one); }) ==
        one.profile + ": the embedding layer is profiled at one micro-batch size only (b=4 s=32); the fit needs 2 or more: "
                      "profile with --micro-batch-size 1 2 4");
  pw::CalibrateInputs held;
  held.profile = f.profile;
  held.holdout = 0.7;
  CHECK(bad_input([&] { pw::calibrate(held); }) ==
        "--holdout 0.7: leaves 1 of the 4 micro-batch shapes of " + f.profile + " for the layer fit, which needs 2; lower "
        "--holdout or profile more micro-batch sizes");
  held.holdout = 1;
  CHECK(bad_input([&] { pw::calibrate(held); }) == "--holdout: must be a fraction in [0, 1), got 1");
  pw::CalibrateInputs traces;
  traces.profile = f.profile;
  traces.runs = {f.runs[0], f.runs[1]};
  traces.traces = {"t.json"};
  CHECK(bad_input([&] { pw::calibrate(traces); }) ==
        "--traces: 1 trace for 2 runs; give one trace per run, in the same order, or none");
  pw::CalibrateInputs missing;
  missing.profile = "/nonexistent/profile.json";
  CHECK(bad_input([&] { pw::calibrate(missing); }) == "--profile: profile file '/nonexistent/profile.json' not found");
}

TEST_CASE("the profile's measured collectives are fitted") {
  // All-reduce over 8 GPUs on a 400 GB/s, 4 us link at bus efficiency 0.75, 1 MiB to 1 GiB, exact:
  // time = 2 (n-1) x 4 us + 2 (n-1)/n x bytes / (0.75 x 400 GB/s); the fit gives back 0.75.
  const pw::Model m = tiny("tiny-llama.json");
  const synth::Truth t;
  pw::Profile p = synth::profile(m, {1, 2, 4}, {32}, t, 0.0, 3);
  const pw::LinkSpec link{400e9, 4e-6};
  for (double bytes = 1 << 20; bytes <= (1 << 30); bytes *= 4)
    p.collectives.push_back({pw::CollectiveKind::AllReduce, 8, bytes,
                             pw::ring_steps(pw::CollectiveKind::AllReduce, 8) * link.latency_s +
                                 pw::ring_traffic(pw::CollectiveKind::AllReduce, 8) * bytes / (0.75 * link.bandwidth_bytes_per_s),
                             link});
  pw::CalibrateInputs in;
  in.profile = synth::write("collectives-synthetic-profile.json", pw::profile_to_json_text(p));
  const pw::Calibration c = pw::calibrate(in);
  REQUIRE(c.collectives.size() == 1);
  CHECK(c.collectives[0].kind == pw::CollectiveKind::AllReduce);
  CHECK(c.collectives[0].efficiency == Approx(0.75).epsilon(1e-6));
  CHECK(c.collectives[0].quality.points == 6);
}
