// Outputs: every command checks all its outputs before any work; none may be an input (model, cluster,
// plan, profile, calibration, schedule or trace file) or another output of the same command, and each
// goes to a folder that exists. What was there stays as it was.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../temp_folder.hpp"
#include "cli_test_util.hpp"
#include "uniform_profile.hpp"

namespace {

namespace fs = std::filesystem;

std::string copy_of(const std::string& example, const fs::path& dir) {
  const fs::path to = dir / fs::path(example).filename();
  fs::copy_file(source_path(example), to, fs::copy_options::overwrite_existing);
  return to.string();
}

// check_bad_input(), and `kept` as it was before.
void check_refused_keeping(const std::vector<std::string>& args, const std::string& message, const std::string& kept = "") {
  const std::string before = kept.empty() ? "" : file_contents(kept);
  check_bad_input(args, message);
  if (!kept.empty()) CHECK(file_contents(kept) == before);
}

}  // namespace

TEST_CASE("simulate --export-csv and --trace never write over the model, cluster or plan file, nor each other") {
  const fs::path dir = fresh_folder("outputs-simulate");
  const std::string model = copy_of("examples/tiny-uniform.json", dir);
  const std::string cluster = copy_of("examples/cluster-2x-h100.json", dir);
  const std::vector<std::string> base{"simulate", "--model", model, "--cluster", "ideal", "--pp", "2", "--microbatches", "4"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  check_refused_keeping(with({"--export-csv", model}),
                        "--export-csv: '" + model + "' is an input of this command (--model); write the output to another file",
                        model);
  check_refused_keeping({"simulate", "--model", model, "--cluster", cluster, "--microbatches", "4", "--export-csv", cluster},
                        "--export-csv: '" + cluster + "' is an input of this command (--cluster); write the output to another file",
                        cluster);
  // The same file under another spelling of its path.
  const std::string dotted = (dir / "." / fs::path(model).filename()).string();
  check_refused_keeping(with({"--trace", dotted}),
                        "--trace: '" + dotted + "' is an input of this command (--model); write the output to another file", model);
  // Before any work: the check wins over the size bound.
  check_refused_keeping({"simulate", "--model", model, "--cluster", "ideal", "--microbatches", "1000000000", "--trace", model},
                        "--trace: '" + model + "' is an input of this command (--model); write the output to another file", model);

  const std::string out = (dir / "both.json").string();
  check_refused_keeping(with({"--trace", out, "--export-csv", out}),
                        "--export-csv: '" + out + "' is also the --trace output; give each output its own file");
  CHECK_FALSE(fs::exists(out));
  // A missing folder is made; one under a file cannot be, and is refused before any work.
  const fs::path made = dir / "made" / "deeper";
  REQUIRE(run_cli(with({"--trace", (made / "t.json").string()})).code == 0);
  CHECK(fs::is_regular_file(made / "t.json"));
  fs::remove_all(dir / "made");
  check_refused_keeping(with({"--trace", (dir / fs::path(model).filename() / "sub" / "t.json").string()}),
                        "--trace: the folder '" + (dir / fs::path(model).filename() / "sub").string() + "' cannot be made: '" +
                            model + "' is a file; write 't.json' elsewhere");

  const std::string plan = (dir / "plan.json").string();
  REQUIRE(run_cli({"plan", "--model", model, "--cluster", "ideal", "--gpus", "2", "--global-batch-size", "4", "--out", plan})
              .code == 0);
  check_refused_keeping({"simulate", "--plan", plan, "--export-csv", plan},
                        "--export-csv: '" + plan + "' is an input of this command (--plan); write the output to another file",
                        plan);
  // A replaced output is whole, with nothing left beside it.
  const std::string csv = (dir / "schedule.csv").string();
  REQUIRE(run_cli(with({"--export-csv", csv})).code == 0);
  const std::string first = file_contents(csv);
  REQUIRE(run_cli(with({"--export-csv", csv, "--schedule", "gpipe"})).code == 0);
  CHECK(file_contents(csv) != first);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 4);
}

TEST_CASE("show, plan, run, profile and calibrate check every output against the inputs and each other") {
  const fs::path dir = fresh_folder("outputs-commands");
  const std::string model = copy_of("examples/tiny-uniform.json", dir);
  const std::string csv = (dir / "s.csv").string();
  REQUIRE(run_cli({"simulate", "--model", model, "--cluster", "ideal", "--pp", "2", "--microbatches", "4", "--export-csv",
                   csv})
              .code == 0);
  check_refused_keeping({"show", "--model", model, "--cluster", "ideal", "--pp", "2", "--schedule-csv", csv, "--svg", csv},
                        "--svg: '" + csv + "' is an input of this command (--schedule-csv); write the output to another file", csv);
  const std::string picture = (dir / "p.svg").string();
  check_refused_keeping({"show", "--model", model, "--cluster", "ideal", "--pp", "2", "--microbatches", "4", "--svg", picture,
                         "--export-csv", picture},
                        "--export-csv: '" + picture + "' is also the --svg output; give each output its own file");

  const std::string exported = (dir / "megatron_args.sh").string();
  check_refused_keeping({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
                         "--out", exported, "--export", "megatron", "--export-dir", dir.string()},
                        "--export-dir: '" + exported + "' is also the --out output; give each output its own file");

  check_refused_keeping({"run", "--model", model, "--cluster", "ideal", "--pp", "2", "--microbatches", "2", "--compute", "sleep",
                         "--trace", model},
                        "--trace: '" + model + "' is an input of this command (--model); write the output to another file", model);

  const std::string llama = copy_of("examples/tiny-llama.json", dir);
  check_refused_keeping({"profile", "--model", llama, "--out", llama},
                        "--out: '" + llama + "' is an input of this command (--model); write the output to another file", llama);

  const std::string runs = (dir / "run.json").string();
  {
    std::ofstream(runs) << "{}";
  }
  check_refused_keeping({"calibrate", "--profile", (dir / "none.json").string(), "--runs", runs, "--out", runs},
                        "--out: '" + runs + "' is an input of this command (--runs); write the output to another file", runs);
}

TEST_CASE("simulate and run --plan: the profile the plan recorded is an input too") {
  const fs::path dir = fresh_folder("outputs-plan-profile");
  const std::string profile = write_uniform_block_profile((dir / "profile.json").string());
  const std::string plan = (dir / "plan.json").string();
  REQUIRE(run_cli({"plan", "--model", source_path("examples/tiny-llama.json"), "--cluster", "ideal", "--gpus", "2",
                   "--global-batch-size", "2", "--profile", profile, "--out", plan})
              .code == 0);
  check_refused_keeping({"simulate", "--plan", plan, "--trace", profile},
                        "--trace: '" + profile + "' is an input of this command (the profile --plan names); write the output to "
                        "another file",
                        profile);
  check_refused_keeping({"run", "--plan", plan, "--compute", "sleep", "--trace", profile},
                        "--trace: '" + profile + "' is an input of this command (the profile --plan names); write the output to "
                        "another file",
                        profile);
}

TEST_CASE("plan --export-dir makes a folder that does not exist yet, one under a file is refused before the search") {
  const fs::path dir = fresh_folder("outputs-export-dir");
  const fs::path exports = dir / "exports" / "megatron";
  const CliResult r = run_cli({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                               "--global-batch-size", "16", "--export", "megatron", "--export-dir", exports.string()});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(fs::is_regular_file(exports / "megatron_args.sh"));
  const std::string file = (dir / "exports" / "megatron" / "megatron_args.sh").string();
  // --gpus 1000000 would search for long: the refusal comes first.
  check_refused_keeping({"plan", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "1000000", "--global-batch-size",
                         "4096", "--export", "megatron", "--export-dir", file + "/sub"},
                        "--export-dir: the folder '" + file + "/sub' cannot be made: '" + file +
                            "' is a file; write 'megatron_args.sh' elsewhere");
}

TEST_CASE("plan --export torchtitan groups interleaved micro-batches as PyTorch does when m is not a multiple of pp") {
  // 6 micro-batches on pp 4: Megatron's group of 4 refuses them; PyTorch runs one round of 6, which ships as
  // the CSV of pipewright's order (PyTorch's own Interleaved1F1B is named only for groups of pp).
  const fs::path dir = fresh_folder("outputs-pytorch-group");
  const std::vector<std::string> args = {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "4", "--pp",
                                         "4", "--global-batch-size", "6", "--schedules", "interleaved", "--top", "1"};
  std::vector<std::string> with_export = args;
  for (const char* a : {"--export", "torchtitan", "--export-dir"}) with_export.push_back(a);
  with_export.push_back(dir.string());
  const CliResult r = run_cli(with_export);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(file_contents(dir / "pipewright_plan.py").find("    p.pipeline_parallel_schedule = \"PipelineScheduleMulti\"\n") !=
        std::string::npos);
  CHECK(fs::is_regular_file(dir / "pipewright_schedule.csv"));
  const CliResult megatron = run_cli(args);
  CHECK(megatron.code == 2);
  CHECK(megatron.err.find("interleaved with micro-batch group size 4 needs a multiple of 4, got 6") != std::string::npos);
}
