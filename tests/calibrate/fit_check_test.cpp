// The fit check: calibrate refuses (or, with --accept-poor-fit, writes and flags) a fit whose step-time R^2
// is negative or whose held-out runs it predicts worse than the profile alone, as runs measured on a shared
// machine make it; the file records the verdict.
#include <catch2/catch.hpp>

#include <cmath>

#include "../cli/cli_test_util.hpp"
#include "../error_text.hpp"
#include "calibrate/calibrate.hpp"
#include "core/json_text.hpp"
#include "synthetic.hpp"

namespace {

using nlohmann::json;

// Rewrites a run file: its step and busy times times `slowdown`, or its step time set to `step_s`, and
// the machine_load verdict `pipewright run` writes, shared or not.
void remeasure(const std::string& path, double slowdown, double step_s, bool shared) {
  json doc = json::parse(pw::read_text_file(path, "run"));
  doc["measured_step_time_s"] = step_s > 0 ? step_s : doc["measured_step_time_s"].get<double>() * slowdown;
  for (json& rank : doc["ranks"]) rank["busy_s"] = rank["busy_s"].get<double>() * slowdown;
  doc["machine_load"] = {{"shared", shared},
                         {"verdict", shared ? "ranks ran 40% of their compute time on a core; load average 5.1 on 2 "
                                              "cores: the machine was shared, measured times are not comparable with "
                                              "the prediction"
                                            : "ranks ran 97% of their compute time on a core; load average 1.0 on 2 cores"}};
  synth::write(path.substr(path.rfind('/') + 1), doc.dump(2));
}

// Five runs to fit on and two held out (--holdout 0.25 of seven).
pw::CalibrateInputs inputs(const synth::Fixture& f) {
  pw::CalibrateInputs in;
  in.profile = f.profile;
  in.runs = f.runs;
  in.holdout = 0.25;
  return in;
}

}  // namespace

TEST_CASE("a good fit passes the check, and the file says so") {
  const synth::Fixture f = synth::fixture("fit-check-good");
  for (size_t i = 0; i < f.runs.size(); ++i) remeasure(f.runs[i], 1, 0, false);
  const pw::Calibration c = pw::calibrate(inputs(f));
  const pw::FitCheck& check = c.fit_check;
  CHECK_FALSE(check.poor());
  CHECK_FALSE(check.accepted);
  CHECK(check.step_r2 > 0.99);
  CHECK(check.held_out_error_pct < check.profile_held_out_error_pct);
  CHECK(check.runs == 7);
  CHECK(check.shared_runs == 0);
  const json file = json::parse(pw::calibration_to_json_text(c));
  CHECK(file["fit_check"]["verdict"] == "good");
  CHECK(file["fit_check"]["problems"].empty());
  CHECK(file["fit_check"]["held_out_tolerance_pct"] == 1.0);
}

TEST_CASE("step times that do not follow their configurations give a negative R^2: refused, or written flagged") {
  const synth::Fixture f = synth::fixture("fit-check-r2");
  // Every run took about 50 ms whatever its configuration, as on a machine busy with something else.
  for (size_t i = 0; i < f.runs.size(); ++i) remeasure(f.runs[i], 1, 0.050 * (1 + 0.01 * static_cast<double>(i)), true);
  pw::CalibrateInputs in = inputs(f);
  in.accept_poor_fit = true;
  const pw::Calibration c = pw::calibrate(in);
  const pw::FitCheck& check = c.fit_check;
  REQUIRE(check.poor());
  CHECK(check.accepted);
  CHECK(check.step_r2 < 0);
  CHECK(check.shared_runs == 7);
  CHECK(check.problems.front() ==
        fmt::format("the run fit predicts the step times worse than their mean does (step-time R^2 = {:.1f})",
                    check.step_r2));
  // The shared runs are named in one warning.
  std::string paths;
  for (const std::string& run : f.runs) paths += (paths.empty() ? "" : ", ") + run;
  CHECK(std::count(c.warnings.begin(), c.warnings.end(),
                   "--runs: 7 of the 7 runs were measured on a shared machine, as their `run` said (its machine_load): " +
                       paths) == 1);

  in.accept_poor_fit = false;
  CHECK(bad_input([&] { pw::calibrate(in); }) == "--runs: the fit is poor: " + pw::poor_fit_text(check) +
                                  "; measure the runs again on a quiet machine, or pass --accept-poor-fit to write it anyway");
  CHECK(pw::poor_fit_text(check).ends_with("; 7 of the 7 runs were measured on a shared machine (their `run` said so)"));

  // The verdict survives the file.
  const pw::Calibration back = pw::calibration_from_json_text(pw::calibration_to_json_text(c), "c.json");
  CHECK(back.fit_check.problems == check.problems);
  CHECK(back.fit_check.accepted);
  CHECK(back.fit_check.step_r2 == Approx(check.step_r2));
  CHECK(back.fit_check.held_out_error_pct == Approx(check.held_out_error_pct));
  CHECK(back.fit_check.shared_runs == 7);
}

TEST_CASE("runs fitted on a slowed machine predict the held-out runs worse than the profile alone: refused") {
  const synth::Fixture f = synth::fixture("fit-check-held-out");
  // The five fitted runs were 40% slow (shared); the two held out were measured on the quiet machine.
  for (size_t i = 0; i < f.runs.size(); ++i) remeasure(f.runs[i], i < 5 ? 1.4 : 1, 0, i < 5);
  pw::CalibrateInputs in = inputs(f);
  in.accept_poor_fit = true;
  const pw::FitCheck check = pw::calibrate(in).fit_check;
  // The fit itself is consistent: the step times follow the configurations.
  CHECK(check.step_r2 > 0.99);
  REQUIRE(check.problems.size() == 1);
  CHECK(check.held_out_error_pct > check.profile_held_out_error_pct + pw::kHeldOutTolerancePct);
  CHECK(check.problems.front() == fmt::format("held-out runs are off by {:.1f}% where the profile alone is off by {:.1f}%",
                                              check.held_out_error_pct, check.profile_held_out_error_pct));
  CHECK(pw::poor_fit_text(check) ==
        check.problems.front() + "; 5 of the 7 runs were measured on a shared machine (their `run` said so)");
  in.accept_poor_fit = false;
  CHECK(bad_input([&] { pw::calibrate(in); }).rfind("--runs: the fit is poor: held-out runs are off by ", 0) == 0);
}

TEST_CASE("the median |error| of held-out points ignores those without a prediction") {
  std::vector<pw::HeldOutPoint> points(4);
  const double predicted[] = {1.1, 0.7, std::nan(""), 1.02};
  for (size_t i = 0; i < 4; ++i) {
    points[i].measured_s = 1;
    points[i].calibrated_s = predicted[i];
  }
  CHECK(pw::median_abs_error_pct(points, &pw::HeldOutPoint::calibrated_s) == Approx(10));
  CHECK(std::isnan(pw::median_abs_error_pct({}, &pw::HeldOutPoint::calibrated_s)));
}

TEST_CASE("calibrate on a poor fit: exit 2 and nothing written, --accept-poor-fit writes it, flagged") {
  const synth::Fixture f = synth::fixture("fit-check-cli");
  for (size_t i = 0; i < f.runs.size(); ++i) remeasure(f.runs[i], 1, 0.050 * (1 + 0.01 * static_cast<double>(i)), true);
  const std::string out = std::string(PIPEWRIGHT_TEST_TMP) + "/fit-check-cli-calibration.json";
  std::remove(out.c_str());
  std::vector<std::string> args = {"calibrate", "--profile", f.profile, "--holdout", "0.25", "--out", out, "--runs"};
  args.insert(args.end(), f.runs.begin(), f.runs.end());
  const CliResult refused = run_cli(args);
  CHECK(refused.code == 2);
  CHECK(refused.out.empty());
  CHECK(refused.err.rfind("error: --runs: the fit is poor: the run fit predicts the step times worse than their mean does "
                                "(step-time R^2 = -", 0) == 0);
  CHECK(refused.err.ends_with("; 7 of the 7 runs were measured on a shared machine (their `run` said so); measure the runs "
                              "again on a quiet machine, or pass --accept-poor-fit to write it anyway\n"));
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  CHECK_FALSE(std::ifstream(out));

  args.push_back("--accept-poor-fit");
  const CliResult accepted = run_cli(args);
  INFO(accepted.err);
  REQUIRE(accepted.code == 0);
  CHECK(accepted.out.find("\nfit check: POOR, written only because of --accept-poor-fit: the run fit predicts the step "
                          "times worse than their mean does (step-time R^2 = -") != std::string::npos);
  const json file = json::parse(pw::read_text_file(out, "calibration"));
  CHECK(file["fit_check"]["verdict"] == "poor");
  CHECK(file["fit_check"]["accepted"] == true);
}
