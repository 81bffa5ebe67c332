// `pipewright calibrate`: the tables, the file, --json, and bad input as one line with exit code 2.
#include <catch2/catch.hpp>

#include "../cli/cli_test_util.hpp"
#include "core/json_text.hpp"
#include "synthetic.hpp"

namespace {

struct Files {
  std::string profile, run1, run2, run3;
};

// Each test case writes its own files (`prefix`): ctest runs the cases as processes side by side, and one
// rewriting a file the other reads fails it.
Files files(const std::string& prefix) {
  const pw::Model m = pw::load_model(source_path("examples/tiny-llama.json"));
  const synth::Truth t;
  Files f;
  f.profile = synth::write(prefix + "-profile.json", pw::profile_to_json_text(synth::profile(m, {1, 2, 4, 8}, {32}, t, 0.01, 5)));
  pw::RunOverheads o;
  o.compute_scale = 1.05;
  o.dispatch_s = 50e-6;
  o.transfer_s = 100e-6;
  const pw::AnalyticCostModel analytic;
  const pw::CalibratedCostModel truth(synth::truth_calibration(t, o), analytic);
  auto scenario = [&](const char* schedule, int m_, int b) {
    pw::Scenario s;
    s.model = m;
    s.cluster = pw::cluster_preset("dgx-h100");
    s.parallel.pp = 2;
    s.parallel.microbatches = m_;
    s.workload.micro_batch_size = b;
    s.schedule = schedule;
    return s;
  };
  f.run1 = synth::run_file(prefix + "-run1.json", scenario("1f1b", 4, 1), truth, 0.002, 1);
  f.run2 = synth::run_file(prefix + "-run2.json", scenario("gpipe", 8, 2), truth, 0.002, 2);
  f.run3 = synth::run_file(prefix + "-run3.json", scenario("zb-h1", 8, 4), truth, 0.002, 3);
  return f;
}

}  // namespace

TEST_CASE("calibrate prints every fit and the held-out errors, and writes calibration.json") {
  const Files f = files("cli");
  const std::string out = std::string(PIPEWRIGHT_TEST_TMP) + "/cli-calibration.json";
  std::remove(out.c_str());
  const CliResult r = run_cli({"calibrate", "--profile", f.profile, "--runs", f.run1, f.run2, f.run3, "--holdout", "0.25",
                               "--out", out});
  INFO(r.err << r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("calibration for synthetic (cpu, 8 cores) from " + f.profile + " and 3 runs (1 held out)\n") == 0);
  CHECK(r.out.find("  kind       phase            form                      overhead           rate      e    bandwidth   "
                   "extrap     R^2   rms err   max err points\n") != std::string::npos);
  // The embedding's B has no work: a fixed time, which no size predicts.
  CHECK(r.out.find("  embedding  backward_input   overhead                   26.0 us              -  1.000            -        - ") !=
        std::string::npos);
  CHECK(r.out.find("  block      forward   ") != std::string::npos);
  CHECK(r.out.find("  pooled   ") != std::string::npos);
  CHECK(r.out.find("run overheads, fitted on 2 runs:\n") != std::string::npos);
  CHECK(r.out.find("  block forward b=8 s=32  ") != std::string::npos);
  CHECK(r.out.find("  median |error|") != std::string::npos);
  CHECK(r.out.find("wrote " + out) != std::string::npos);
  const pw::Calibration c = pw::load_calibration(out);
  CHECK(c.runs.size() == 3);
  CHECK(c.runs[2].held_out);
  CHECK(c.held_out_runs.size() == 1);

  // --json prints the file's own text.
  const CliResult j = run_cli({"calibrate", "--profile", f.profile, "--runs", f.run1, f.run2, f.run3, "--holdout", "0.25",
                               "--out", out, "--json"});
  REQUIRE(j.code == 0);
  CHECK(j.out == pw::read_text_file(out, "calibration"));
}

TEST_CASE("calibrate: bad input exits 2 with one line") {
  const Files f = files("cli-bad");
  const std::string out = std::string(PIPEWRIGHT_TEST_TMP) + "/cli-bad-calibration.json";
  const CliResult same = run_cli({"calibrate", "--profile", f.profile, "--out", f.profile});
  CHECK(same.code == 2);
  CHECK(same.err == "error: --out: '" + f.profile + "' is an input of this command (--profile); write the output to another file\n");
  const CliResult holdout = run_cli({"calibrate", "--profile", f.profile, "--holdout", "1.5", "--out", out});
  CHECK(holdout.code == 2);
  CHECK(holdout.err == "error: --holdout: must be a fraction in [0, 1), got 1.5\n");
  const CliResult missing = run_cli({"calibrate", "--profile", f.profile});
  CHECK(missing.code == 2);
  CHECK(missing.err == "error: --out is required\n");
  const CliResult run = run_cli({"calibrate", "--profile", f.profile, "--runs", f.profile, "--out", out});
  CHECK(run.code == 2);
  CHECK(run.err == "error: --runs: " + f.profile +
                       ": scenario is missing: this is not `pipewright run --json` output of this version; run it again "
                       "with --json\n");
}
