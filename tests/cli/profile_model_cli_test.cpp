// A profile of a different model: simulate, plan and run refuse it with one line naming the differing figure,
// --force-profile uses it and says so, and a profile written before the model was recorded is used with a note.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "uniform_profile.hpp"

namespace {

std::string absolute_tmp(const std::string& name) {
  return std::filesystem::absolute(std::string(PIPEWRIGHT_TEST_TMP) + "/" + name).lexically_normal().string();
}

const std::string kGpt = source_path("examples/tiny-gpt.json");


// One line naming the figure and both values, the file, and the two fixes.
std::string refusal(const std::string& profile) {
  return "error: --profile: " + profile + " measured 'tiny-llama' with kv_heads 2, but the model 'tiny-gpt' has kv_heads 4; "
         "profile this model (pipewright profile --model ...) or pass --force-profile to use it anyway\n";
}

}  // namespace

TEST_CASE("simulate, plan and run refuse a profile of another model unless --force-profile") {
  const std::string profile = write_uniform_block_profile(absolute_tmp("llama-profile.json"));
  const std::vector<std::string> simulate{"simulate", "--model", kGpt, "--cluster", "ideal", "--pp", "2",
                                          "--microbatches", "2", "--profile", profile};
  const std::vector<std::string> plan{"plan", "--model", kGpt, "--cluster", "ideal", "--gpus", "2",
                                      "--global-batch-size", "2", "--profile", profile};
  const std::vector<std::string> run{"run", "--model", kGpt, "--cluster", "ideal", "--pp", "2", "--microbatches", "2",
                                     "--iterations", "1", "--warmup", "0", "--profile", profile};
  for (const std::vector<std::string>& args : {simulate, plan, run}) {
    INFO(args.front());
    const CliResult refused = run_cli(args);
    CHECK(refused.code == 2);
    CHECK(refused.err == refusal(profile));
    CHECK(refused.out.empty());
  }

  const std::string forced_line = "cost model: analytic <- profiled (" + profile +
                                  ": test on cpu: test CPU (2 cores); measured 'tiny-llama' with kv_heads 2 against 4, "
                                  "used by --force-profile)\n";
  const CliResult forced = run_cli(with(simulate, {"--force-profile"}));
  INFO(forced.err);
  REQUIRE(forced.code == 0);
  CHECK(forced.out.find("\n" + forced_line) != std::string::npos);
  const CliResult planned = run_cli(with(plan, {"--force-profile", "--top", "1"}));
  INFO(planned.err);
  REQUIRE(planned.code == 0);
  CHECK(planned.out.find("\n" + forced_line) != std::string::npos);
  const CliResult ran = run_cli(with(run, {"--force-profile", "--json"}));
  INFO(ran.err);
  REQUIRE(ran.code == 0);
  CHECK(nlohmann::json::parse(ran.out)["cost_model"] == "profiled");
}

TEST_CASE("a profile of the same shapes under another name or depth is used without a word") {
  const std::string profile = write_uniform_block_profile(absolute_tmp("llama-profile-deep.json"));
  nlohmann::json deep = nlohmann::json::parse(std::ifstream(kLlama));
  deep["name"] = "tiny-llama-32";
  deep["transformer"]["layers"] = 32;
  const std::string model = absolute_tmp("tiny-llama-32.json");
  std::ofstream(model) << deep.dump();
  const CliResult r = run_cli({"simulate", "--model", model, "--cluster", "ideal", "--pp", "2", "--microbatches", "2",
                               "--profile", profile});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("cost model: analytic <- profiled (" + profile + ": test on cpu: test CPU (2 cores))\n") !=
        std::string::npos);
}

TEST_CASE("a profile written before the model was recorded is used, with a note that it was not checked") {
  pw::Profile old = uniform_block_profile();
  old.model.reset();
  const std::string profile = absolute_tmp("old-profile.json");
  std::ofstream(profile) << pw::profile_to_json_text(old);
  const CliResult r = run_cli({"simulate", "--model", kGpt, "--cluster", "ideal", "--pp", "2", "--microbatches", "2",
                               "--profile", profile});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("cost model: analytic <- profiled (" + profile +
                   ": test on cpu: test CPU (2 cores); no model recorded, not checked)\n") != std::string::npos);
}
