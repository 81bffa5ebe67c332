// --profile in simulate, plan and compare (and in plan files, which simulate --plan reads again); run profiling
// first when no profile is given; run with recomputation and tied embeddings on the cpu backend.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "uniform_profile.hpp"
#include "core/model.hpp"
#include "profiler/profile.hpp"

namespace {

using nlohmann::json;



// The uniform block profile (uniform_profile.hpp) in a file of this test's, by its absolute path.
std::string write_uniform_profile(const std::string& name) {
  return std::filesystem::absolute(write_uniform_block_profile(tmp(name))).lexically_normal().string();
}

std::vector<std::string> simulate_args(const std::vector<std::string>& more) {
  std::vector<std::string> args{"simulate", "--model", kLlama, "--cluster", "ideal", "--pp", "2", "--microbatches",
                                "2", "--schedule", "gpipe", "--split", "4,4"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("simulate --profile: measured layer times where the profile has the micro-batch, and says so") {
  const std::string profile = write_uniform_profile("wiring-profile.json");
  const CliResult r = run_cli(simulate_args({"--profile", profile}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\ncost model: analytic <- profiled (" + profile + ": test on cpu: test CPU (2 cores))\n"
                   "  micro-batch 1 x 32 tokens: embedding, block, head from the profile\n") != std::string::npos);

  // gpipe on the ideal cluster, 4 blocks per stage: (m + p - 1)(F + B + W) = 3 x 24 ms.
  const CliResult j = run_cli(simulate_args({"--profile", profile, "--json"}));
  REQUIRE(j.code == 0);
  const json sim = json::parse(j.out);
  CHECK(sim["step_time_s"].get<double>() == Approx(0.072).epsilon(1e-6));
  CHECK(sim["cost_model"]["name"] == "profiled");
  CHECK(sim["cost_model"]["chain"] == json::array({"analytic", "profiled"}));
  CHECK(sim["cost_model"]["profile"]["path"] == profile);
  CHECK(sim["cost_model"]["profile"]["source"] == "file");
  CHECK(sim["cost_model"]["coverage"][0]["profiled"] == json::array({"embedding", "block", "head"}));

  // Micro-batch 2 is not in the profile: the analytic model times its layers (the measured optimizer rate,
  // per parameter, still applies), and the output says why.
  const CliResult b2 = run_cli(simulate_args({"--profile", profile, "--micro-batch-size", "2", "--json"}));
  const CliResult b2_analytic = run_cli(simulate_args({"--micro-batch-size", "2", "--json"}));
  REQUIRE(b2.code == 0);
  REQUIRE(b2_analytic.code == 0);
  const json profiled_stages = json::parse(b2.out)["stages"], analytic_stages = json::parse(b2_analytic.out)["stages"];
  REQUIRE(profiled_stages.size() == 2);
  for (size_t i = 0; i < 2; ++i)
    for (const char* phase : {"forward_s", "backward_input_s", "backward_weight_s"})
      CHECK(profiled_stages[i][phase] == analytic_stages[i][phase]);
  CHECK(json::parse(b2_analytic.out)["cost_model"]["name"] == "analytic");
  const CliResult b2_text = run_cli(simulate_args({"--profile", profile, "--micro-batch-size", "2"}));
  CHECK(b2_text.out.find("  micro-batch 2 x 32 tokens: embedding, block, head from the analytic model (the profile "
                         "has no entry at micro-batch 2 x 32 tokens)\n") != std::string::npos);
}

TEST_CASE("plan --profile records the profile in the plan file, and simulate --plan reads it again") {
  const std::string profile = write_uniform_profile("plan-profile.json");
  const std::string plan = tmp("profiled-plan.json");
  std::remove(plan.c_str());
  const CliResult r = run_cli({"plan", "--model", kLlama, "--cluster", "ideal", "--gpus", "2", "--global-batch-size",
                               "4", "--micro-batch-size", "1", "--pp", "2", "--schedules", "gpipe,1f1b", "--recompute",
                               "none", "--top", "2", "--profile", profile, "--out", plan});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\ncost model: analytic <- profiled (" + profile + ": test on cpu: test CPU (2 cores))\n"
                   "  micro-batch 1 x 32 tokens: embedding, block, head from the profile\n") != std::string::npos);
  json file = json::parse(std::ifstream(plan));
  CHECK(file["cost_model"]["name"] == "profiled");
  CHECK(file["cost_model"]["profile"] ==
        json({{"path", profile}, {"tool", "test"}, {"machine", "cpu: test CPU (2 cores)"}}));

  // The plan's prediction again, with the profile it recorded.
  const CliResult again = run_cli({"simulate", "--plan", plan, "--json"});
  INFO(again.err);
  REQUIRE(again.code == 0);
  const json sim = json::parse(again.out);
  CHECK(sim["step_time_s"] == file["predicted"]["step_time_s"]);
  CHECK(sim["cost_model"]["profile"]["path"] == profile);

  // Gone: the user is told to pass it again, and passing it works.
  const std::string moved = tmp("plan-profile-moved.json");
  std::filesystem::rename(profile, moved);
  const CliResult gone = run_cli({"simulate", "--plan", plan});
  CHECK(gone.code == 2);
  CHECK(gone.err == "error: --plan: " + plan + " was made with the profile '" + profile +
                        "' (test on cpu: test CPU (2 cores)), which cannot be read now: profile file '" + profile +
                        "' not found; pass --profile FILE again\n");
  const CliResult passed = run_cli({"simulate", "--plan", plan, "--profile", moved, "--json"});
  REQUIRE(passed.code == 0);
  CHECK(json::parse(passed.out)["step_time_s"] == file["predicted"]["step_time_s"]);

  // A "profiled" plan must name its profile.
  file["cost_model"].erase("profile");
  const std::string bare = tmp("profiled-plan-without-profile.json");
  std::ofstream(bare) << file.dump(2);
  const CliResult bad = run_cli({"simulate", "--plan", bare});
  CHECK(bad.code == 2);
  CHECK(bad.err == "error: " + bare + ": cost_model.profile is missing: a \"profiled\" plan names its profile file\n");
}

TEST_CASE("plan --json and compare --profile report the cost model") {
  const std::string profile = write_uniform_profile("compare-profile.json");
  const CliResult p = run_cli({"plan", "--model", kLlama, "--cluster", "ideal", "--gpus", "2", "--global-batch-size",
                               "4", "--micro-batch-size", "2", "--pp", "2", "--schedule", "1f1b", "--recompute", "none",
                               "--top", "1", "--profile", profile, "--json"});
  INFO(p.err);
  REQUIRE(p.code == 0);
  const json j = json::parse(p.out);
  CHECK(j["cost_model"]["name"] == "profiled");
  CHECK(j["cost_model"]["coverage"][0]["fallback"] == json::array({"embedding", "block", "head"}));
  CHECK(j["cost_model"]["coverage"][0]["reason"] == "the profile has no entry at micro-batch 2 x 32 tokens");

  const CliResult c = run_cli({"compare", "--model", kLlama, "--cluster", "ideal", "--pp", "2", "--microbatches", "4",
                               "--schedules", "gpipe,1f1b", "--profile", profile});
  INFO(c.err);
  REQUIRE(c.code == 0);
  CHECK(c.out.find("\ncost model: analytic <- profiled (" + profile + ": test on cpu: test CPU (2 cores))\n"
                   "  micro-batch 1 x 32 tokens: embedding, block, head from the profile\n") != std::string::npos);
}

TEST_CASE("run without --profile profiles this machine first and predicts with it, --no-profile does not") {
  const std::vector<std::string> base{"run", "--model", kLlama, "--cluster", "ideal", "--pp", "2", "--microbatches", "2",
                                      "--iterations", "1", "--warmup", "0"};
  std::vector<std::string> text_args = base;
  const CliResult text = run_cli(text_args);
  INFO(text.err);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("\nprofiled tiny-llama on this machine first (") != std::string::npos);
  CHECK(text.out.find(" s, micro-batch 1 x 32 tokens); --profile FILE reuses a saved profile, --no-profile predicts "
                      "with the analytic model\n") != std::string::npos);
  CHECK(text.out.find("(analytic <- profiled (measured here in ") != std::string::npos);

  std::vector<std::string> json_args = base;
  json_args.push_back("--json");
  const CliResult r = run_cli(json_args);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["cost_model"] == "profiled");
  CHECK(j["cost_model_chain"]["profile"]["source"] == "measured by this command");
  CHECK(j["cost_model_chain"]["profile"]["path"].is_null());
  CHECK(j["cost_model_chain"]["profile"]["measured_s"].get<double>() > 0);
  CHECK(j["cost_model_chain"]["coverage"][0]["profiled"] == json::array({"embedding", "block", "head"}));

  json_args.push_back("--no-profile");
  const CliResult analytic = run_cli(json_args);
  REQUIRE(analytic.code == 0);
  const json a = json::parse(analytic.out);
  CHECK(a["cost_model"] == "analytic");
  CHECK(a["cost_model_chain"]["profile"].is_null());
}

TEST_CASE("run: recomputation and tied embeddings run for real") {
  // Full recomputation keeps only each block's input, so gpipe's peak (every F before any B) falls.
  const std::vector<std::string> base{"run", "--model", kLlama, "--cluster", "ideal", "--pp", "2", "--microbatches", "2",
                                      "--schedule", "gpipe", "--iterations", "1", "--warmup", "0", "--no-profile",
                                      "--json"};
  auto peaks = [&](const std::string& recompute) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--recompute", recompute});
    const CliResult r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    // Named, so that the parsed run outlives the loop over its ranks.
    const json run = json::parse(r.out);
    std::vector<double> out;
    for (const json& rank : run["ranks"]) out.push_back(rank["activation_peak_bytes"].get<double>());
    return out;
  };
  const std::vector<double> none = peaks("none"), selective = peaks("selective"), full = peaks("full");
  for (size_t r = 0; r < none.size(); ++r) {
    CHECK(selective[r] < none[r]);
    CHECK(full[r] < selective[r]);
  }

  json tied = json::parse(std::ifstream(kLlama));
  tied["name"] = "tiny-llama-tied";
  tied["transformer"]["tied_embeddings"] = true;
  const std::string path = tmp("tiny-llama-tied.json");
  std::ofstream(path) << tied.dump(2);
  const CliResult r = run_cli({"run", "--model", path, "--cluster", "ideal", "--pp", "2", "--microbatches", "2",
                               "--iterations", "2", "--warmup", "0", "--no-profile", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["losses"].size() == 2);
}

TEST_CASE("run --plan runs the plan file's action lists and predicts what simulate --plan predicts") {
  const std::string profile = write_uniform_profile("run-plan-profile.json");
  const std::string plan = tmp("run-plan.json");
  std::remove(plan.c_str());
  // The profile measured micro-batch size 1 on one device: without --micro-batch-size and --tp the search
  // keeps to them (the analytic model's numbers for the rest would not compare with measured ones).
  const CliResult r = run_cli({"plan", "--model", kLlama, "--cluster", "ideal", "--gpus", "2", "--pp", "2",
                               "--global-batch-size", "4", "--schedules", "gpipe,1f1b", "--top", "1", "--profile",
                               profile, "--out", plan, "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json plans = json::parse(r.out);
  CHECK(plans["plans"][0]["micro_batch_size"] == 1);
  CHECK(plans["plans"][0]["tp"] == 1);

  const CliResult run = run_cli({"run", "--plan", plan, "--compute", "sleep", "--iterations", "1", "--warmup", "0",
                                 "--json"});
  INFO(run.err);
  REQUIRE(run.code == 0);
  const json measured = json::parse(run.out);
  const json simulated = json::parse(run_cli({"simulate", "--plan", plan, "--json"}).out);
  CHECK(measured["predicted_step_time_s"] == simulated["step_time_s"]);
  CHECK(measured["schedule"] == simulated["schedule"]);
  CHECK(measured["cost_model"] == "profiled");  // the plan's recorded profile, not one measured again

  const CliResult both = run_cli({"run", "--plan", plan, "--pp", "2"});
  CHECK(both.code == 2);
  CHECK(both.err == "error: --plan: the plan file gives the scenario; drop --pp (only --cost-param adds to a plan)\n");
}
