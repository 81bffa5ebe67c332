// The planner's speed target (docs/benchmarks.md, "Planner"): GPT-3 175B on 1024 A100-80GB GPUs, global
// batch 1536, the full space as `pipewright plan` searches it by default (tp 1..8, cp where the sequence
// is long enough, every pp and dp, every micro-batch size dividing the batch, every schedule and vpp, the
// recompute modes, both rank orders), top 5.
//
//   BM_Search       search_plans() alone, with 1 and 2 threads.
//   BM_PlanCommand  `pipewright plan` as a user runs it: the search, the uniform and parameters splits of
//                   the five plans, and the table (written to a discarded stream), with 2 threads.
//   BM_PlanDeepSeekV3  the same for a mixture of experts: DeepSeek-V3 from its config.json
//                   (examples/deepseek-v3.config.json) on 2048 H800s, global batch 15360 of 4096 tokens,
//                   ep searched up to 64.
//
// Counters: configurations in the space, how many the simulator scored, and the best step time found
// (the same for every thread count).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "core/analytic_cost_model.hpp"
#include "planner/search.hpp"
#include "planner/serving_plan.hpp"
#include "serving/engine_profile.hpp"
#include "serving/serving_workload.hpp"

namespace {

using namespace pw;

Scenario gpt3_base() {
  Scenario s;
  s.model = model_preset("gpt3-175b");
  s.cluster = cluster_preset("dgx-a100-80gb");
  s.global_batch_size = 1536;
  return s;
}

void BM_Search(benchmark::State& state) {
  const Scenario base = gpt3_base();
  SearchSpace space;
  space.gpus = 1024;
  const AnalyticCostModel cost;
  SearchOptions options;
  options.top = 5;
  options.threads = static_cast<int>(state.range(0));
  SearchResult result;
  for (auto _ : state) {
    result = search_plans(base, space, cost, options);
    benchmark::DoNotOptimize(result.plans.data());
  }
  state.counters["configurations"] = static_cast<double>(result.stats.candidates);
  state.counters["simulated"] = static_cast<double>(result.stats.simulated);
  state.counters["best_step_s"] = result.plans.front().evaluation.metrics.step_time_s;
}
BENCHMARK(BM_Search)->Arg(1)->Arg(2)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(3);

// `pipewright <args>` as a user runs it, its output discarded.
void run_command(benchmark::State& state, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  for (auto _ : state) {
    std::ostringstream out, err;
    const int code = cli_main(static_cast<int>(argv.size()), argv.data(), out, err);
    if (code != 0) state.SkipWithError(err.str().c_str());
    benchmark::DoNotOptimize(out.str().size());
  }
}

void BM_PlanCommand(benchmark::State& state) {
  run_command(state, {"pipewright", "plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1024",
                      "--global-batch-size", "1536", "--threads", "2"});
}
BENCHMARK(BM_PlanCommand)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(3);

void BM_PlanDeepSeekV3(benchmark::State& state) {
  run_command(state, {"pipewright", "plan", "--model", PIPEWRIGHT_SOURCE_DIR "/examples/deepseek-v3.config.json",
                      "--cluster", "dgx-h800", "--gpus", "2048", "--global-batch-size", "15360", "--max-ep", "64",
                      "--threads", "2"});
}
BENCHMARK(BM_PlanDeepSeekV3)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(3);

// Issue 40's searches, each as docs/benchmarks.md times it (median of 5): DeepSeek-V3 with ep and the ZeRO levels
// searched, the same at 32K tokens (cp then joins the space), and serve plan of 1,000 GPUs with its pools split.
void BM_PlanDeepSeekV3Zeros(benchmark::State& state) {
  run_command(state, {"pipewright", "plan", "--model", PIPEWRIGHT_SOURCE_DIR "/examples/deepseek-v3.config.json",
                      "--cluster", "dgx-h800", "--gpus", "2048", "--global-batch-size", "15360", "--max-ep", "64",
                      "--zeros", "1,2,3", "--top", "3", "--threads", "2"});
}
BENCHMARK(BM_PlanDeepSeekV3Zeros)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_PlanDeepSeekV3LongContext(benchmark::State& state) {
  run_command(state, {"pipewright", "plan", "--model", PIPEWRIGHT_SOURCE_DIR "/examples/deepseek-v3.config.json",
                      "--cluster", "dgx-h800", "--gpus", "2048", "--global-batch-size", "1920", "--seq-len", "32768",
                      "--max-ep", "64", "--zeros", "1,2,3", "--top", "3", "--threads", "2"});
}
BENCHMARK(BM_PlanDeepSeekV3LongContext)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_ServePlan1000(benchmark::State& state) {
  run_command(state, {"pipewright", "serve", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "1000",
                      "--disaggregate", "--threads", "2"});
}
BENCHMARK(BM_ServePlan1000)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_ServePlan1000Varied(benchmark::State& state) {
  run_command(state, {"pipewright", "serve", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "1000",
                      "--disaggregate", "--prompt-tokens", "uniform:128:2048", "--output-tokens", "uniform:16:512",
                      "--requests", "1000", "--threads", "2"});
}
BENCHMARK(BM_ServePlan1000Varied)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1)->Repetitions(5)->ReportAggregatesOnly(true);

// The same search through plan_serving() on one thread: its counters say how many configurations it simulated
// (on one thread the count is the same every run) and how many the leaders' floors dropped.
void BM_ServePlanSearch(benchmark::State& state) {
  const Model model = model_preset("llama3-8b");
  const Cluster cluster = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  WorkloadSpec w;
  w.prompt = parse_length("uniform:128:2048", "--prompt-tokens");
  w.output = parse_length("uniform:16:512", "--output-tokens");
  w.requests = 1000;
  const std::vector<ServingRequest> requests = make_requests(w);
  const ServingEngineFor engine_for = [&](int tp, int pp) {
    ServingConfig c;
    c.tp = tp;
    c.pp = pp;
    c.apply(engine_profile("vllm", "", model, cluster.gpu_at(0), tp, pp));
    return c;
  };
  ServingPlanResult result;
  for (auto _ : state) {
    result = plan_serving(model, cluster, cost, 1000, engine_for, requests, {}, static_cast<int>(state.range(0)), true, 1);
    benchmark::DoNotOptimize(result.plans.data());
  }
  state.counters["configurations"] = result.considered;
  state.counters["simulated"] = result.simulated;
  state.counters["best_output_tokens_per_s"] = result.plans.front().metrics.output_tokens_per_s;
}
// top 5 as serve plan prints by default; top 1000: every configuration simulated (nothing can be dropped).
BENCHMARK(BM_ServePlanSearch)->Arg(5)->Arg(1000)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// Planning priced from AIConfigurator's H200 tables against the analytic model alone, the same search: the
// tables must keep the search within 2x (docs/benchmarks.md). The tables are imported into the build folder
// on first use (scripts/install-deps.sh's .venv has what the import needs).
std::string h200_tables() {
  // In the build folder, wherever the benchmark is started from.
  const std::string folder = PIPEWRIGHT_BENCH_DIR "/kernels-h200-vllm";
  if (!std::filesystem::exists(folder + "/manifest.json")) {
    std::vector<std::string> args{"pipewright", "kernels",    "import", "aiconfigurator", "--system", "h200_sxm",
                                  "--backend",  "vllm",       "--version", "0.24.0",       "--out",    folder};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    std::ostringstream out, err;
    if (cli_main(static_cast<int>(argv.size()), argv.data(), out, err) != 0) return "";
  }
  return folder;
}

const std::vector<std::string> kPlanH200 = {"pipewright", "plan", "--model", "llama3-70b", "--cluster", "hgx-h200",
                                            "--gpus", "64", "--global-batch-size", "64", "--threads", "2"};

void BM_PlanH200(benchmark::State& state) { run_command(state, kPlanH200); }
BENCHMARK(BM_PlanH200)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(5);

// `args` with --kernels the H200 tables, imported on first use.
void run_with_tables(benchmark::State& state, std::vector<std::string> args) {
  const std::string tables = h200_tables();
  if (tables.empty()) {
    state.SkipWithError("the H200 tables could not be imported (run scripts/install-deps.sh)");
    return;
  }
  args.insert(args.end(), {"--kernels", tables});
  run_command(state, args);
}

void BM_PlanH200Tables(benchmark::State& state) { run_with_tables(state, kPlanH200); }
BENCHMARK(BM_PlanH200Tables)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(5);

// serve plan's search over tp, pp and replicas, each a serving simulation, without and with the tables.
const std::vector<std::string> kServePlanH200 = {"pipewright",   "serve",  "plan",          "--model",      "llama3-70b",
                                                 "--cluster",    "hgx-h200", "--gpus",      "8",            "--prompt-tokens",
                                                 "1024",         "--output-tokens", "256",   "--concurrency", "64",
                                                 "--requests",   "512"};

void BM_ServePlanH200(benchmark::State& state) { run_command(state, kServePlanH200); }
BENCHMARK(BM_ServePlanH200)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(5);

void BM_ServePlanH200Tables(benchmark::State& state) { run_with_tables(state, kServePlanH200); }
BENCHMARK(BM_ServePlanH200Tables)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(5);

// serve simulate of 10,000 requests (the bound: under a second) under each engine's scheduler.
void BM_ServeSimulate10k(benchmark::State& state, const char* engine) {
  run_command(state, {"pipewright", "serve", "simulate", "--model", "llama3-70b", "--cluster", "hgx-h200", "--tp", "8",
                      "--requests", "10000", "--prompt-tokens", "uniform:128:2048", "--output-tokens", "uniform:16:512",
                      "--concurrency", "256", "--engine", engine});
}
BENCHMARK_CAPTURE(BM_ServeSimulate10k, vllm, "vllm")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(3);
BENCHMARK_CAPTURE(BM_ServeSimulate10k, sglang, "sglang")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(3);
BENCHMARK_CAPTURE(BM_ServeSimulate10k, trtllm, "trtllm")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
