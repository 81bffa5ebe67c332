// Bounds before work: the absurd sizes of issue 12 each end at once with exit 2 and one line that names
// the estimate, this machine's limit and the fix; checked batch arithmetic names the options given.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "core/json_text.hpp"

namespace {

// Exit 2, nothing on stdout, one line on stderr that starts and ends as given (the middle holds this
// machine's available memory), well before the work would have begun to hurt.
void check_refused(const std::vector<std::string>& args, const std::string& start, const std::string& end) {
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_cli(args);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.starts_with("error: " + start));
  CHECK(r.err.ends_with(end + "\n"));
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(seconds < 10);  // the target is 2 s; generous for a loaded machine
}

const std::string kMemory = " of this machine's memory; ";

// A plan file of the tiny Llama with `blocks` transformer blocks on 2 stages of 16 GPUs: the embedding on the
// first, every block and the head on the second (made by plan, then grown; its prediction dropped).
std::string plan_of_blocks(long blocks) {
  const std::string small = tmp("plan-of-" + std::to_string(blocks) + "-blocks-small.json");  // one per test case
  REQUIRE(run_cli({"plan", "--model", kLlama, "--cluster", "dgx-h100", "--gpus", "16", "--global-batch-size", "16",
                   "--pp", "2", "--schedules", "1f1b", "--out", small})
              .code == 0);
  std::ifstream in(small);
  nlohmann::json plan = nlohmann::json::parse(in);
  plan["model"]["transformer"]["layers"] = blocks;
  plan["split"]["stages"][1]["layers"] = {1, blocks + 1};
  plan.erase("predicted");
  const std::string path = tmp("plan-of-" + std::to_string(blocks) + "-blocks.json");
  std::ofstream(path) << plan.dump();
  return path;
}

}  // namespace

TEST_CASE("simulate --microbatches 1000000000: refused with the estimate before the schedule is built") {
  check_refused({"simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--microbatches", "1000000000"},
                "simulate: 3,000,000,000 actions (--pp 1 x 1 chunk x --microbatches 1000000000 x 3 for F, B and W) would "
                "take about 300 GB; the limit is ",
                kMemory + "lower --microbatches or pass --allow-large");
  check_refused({"simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--global-batch-size", "1000000000"},
                "simulate: 3,000,000,000 actions (--pp 1 x 1 chunk x 1000000000 micro-batches (--global-batch-size "
                "1000000000 / (micro-batch size 1 x dp 1)) x 3 for F, B and W) would take about 300 GB; the limit is ",
                kMemory + "lower --global-batch-size or pass --allow-large");
  check_refused({"compare", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--microbatches", "1000000000",
                 "--schedules", "1f1b"},
                "compare: 3,000,000,000 actions", kMemory + "lower --microbatches or pass --allow-large");
  check_refused({"show", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--microbatches", "1000000000"},
                "show: 3,000,000,000 actions", kMemory + "lower --microbatches or pass --allow-large");
}

TEST_CASE("simulate --dp 1000000000 --microbatches 8: the global batch overflows an int, named by its options") {
  check_bad_input({"simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--dp", "1000000000",
                   "--microbatches", "8"},
                  "global batch --microbatches x --micro-batch-size x --dp = 8 x 1 x 1000000000 is beyond 2147483647; "
                  "lower --microbatches or --dp");
  check_bad_input({"simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--dp", "1000000000", "--tp", "8",
                   "--microbatches", "1"},
                  "GPUs --tp x --cp x --pp x --dp = 8 x 1 x 1 x 1000000000 is beyond 2147483647; use fewer GPUs");
  check_bad_input({"simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--dp", "1000000000",
                   "--micro-batch-size", "4", "--global-batch-size", "8"},
                  "--global-batch-size: 8 is less than micro-batch size x dp = 4 x 1000000000; lower --micro-batch-size "
                  "or --dp, or raise --global-batch-size");
}

TEST_CASE("simulate --dp 100000000 and 2000000000: a uniform cluster compares a node's worth of replicas and ring links") {
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_cli({"simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-80gb", "--dp", "100000000",
                               "--microbatches", "8", "--json"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10);
  CHECK(r.out.find("\"global_batch_size\": 800000000") != std::string::npos);
  const CliResult widest = run_cli({"simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-80gb", "--dp",
                                    "2000000000", "--microbatches", "1", "--json"});
  CHECK(widest.code == 0);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10);
}

TEST_CASE("plan --global-batch-size 2147483647 and 1000000000: refused before the search") {
  check_refused({"plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "8", "--global-batch-size",
                 "2147483647"},
                "plan: ", kMemory + "lower --global-batch-size or fix --micro-batch-size or pass --allow-large");
  check_refused({"plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1024", "--global-batch-size",
                 "1000000000"},
                "plan: ", kMemory + "lower --global-batch-size or fix --micro-batch-size or pass --allow-large");
}

TEST_CASE("run --iterations 1000000000 and run --model llama3-8b on the cpu backend: refused before they start") {
  const std::vector<std::string> tiny{"run", "--model", source_path("examples/tiny-uniform.json"), "--cluster", "ideal",
                                      "--pp", "2", "--microbatches", "2", "--compute", "sleep"};
  std::vector<std::string> many = tiny;
  for (const char* a : {"--iterations", "1000000000"}) many.push_back(a);
  check_refused(many, "run: 1,000,000,001 iterations x 12 actions (--iterations 1000000000 + --warmup 1) would take about ",
                kMemory + "lower --iterations or pass --allow-large");
  check_refused({"run", "--model", "llama3-8b", "--cluster", "dgx-h100", "--microbatches", "1"},
                "run: the cpu backend's float32 tensors for the 8,030,261,248 parameters of llama3-8b (16 B each with "
                "adam) and 1 micro-batch of activations would take about ",
                kMemory + "run a smaller model, use --compute sleep or pass --allow-large");
}

TEST_CASE("one --allow-large flag: the same on every command with bounds, and a small scenario runs with it") {
  for (const char* command : {"simulate", "show", "compare", "plan", "profile", "run"}) {
    const CliResult help = run_cli({command, "--help"});
    CHECK(help.out.find("--allow-large") != std::string::npos);
  }
  const CliResult r = run_cli({"simulate", "--model", source_path("examples/tiny-uniform.json"), "--cluster", "ideal",
                               "--pp", "2", "--microbatches", "4", "--allow-large"});
  CHECK(r.code == 0);
}

TEST_CASE("simulate --plan: batch and GPU products from a plan file name its fields, exactly and without wrapping") {
  const std::string dir = std::string(PIPEWRIGHT_TEST_TMP);
  const std::string plan = dir + "/bounds-plan.json";
  REQUIRE(run_cli({"plan", "--model", source_path("examples/tiny-uniform.json"), "--cluster", "ideal", "--gpus", "1",
                   "--global-batch-size", "8", "--out", plan})
              .code == 0);
  nlohmann::json j = nlohmann::json::parse(pw::read_text_file(plan, "plan"));
  const std::string edited = dir + "/bounds-plan-edited.json";
  auto simulate = [&](const nlohmann::json& doc) {
    std::ofstream(edited) << doc.dump();
    return run_cli({"simulate", "--plan", edited});
  };
  j["parallel"]["dp"] = 1000000000;
  j["gpus"] = 1000000000;
  const int m = j["parallel"]["microbatches"];
  CliResult r = simulate(j);
  CHECK(r.code == 2);
  CHECK(r.err == "error: " + edited + ": global_batch_size is 8 but microbatches x micro_batch_size x dp = " +
                     std::to_string(m * std::int64_t{1000000000} * j["workload"]["micro_batch_size"].get<int>()) + "\n");
  j["parallel"]["tp"] = 1000;
  j["parallel"]["pp"] = 1000;
  r = simulate(j);
  CHECK(r.code == 2);
  CHECK(r.err == "error: " + edited + ": parallel tp x cp x pp x dp = 1000 x 1 x 1000 x 1000000000 is beyond 2147483647 GPUs\n");
}

TEST_CASE("a gradient bucket of a few parameters is refused before its billions of buckets are made") {
  // Llama 3 8B at pp 2: stage 0 holds 4,233,240,576 parameters (the embedding and 16 blocks); buckets of 2 make
  // half as many, where a stage may reduce in at most 100,000 (issue 37: 24 s, 4 GB, then bad_alloc).
  check_bad_input({"simulate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--pp", "2", "--dp", "32",
                   "--microbatches", "16", "--ddp-bucket-size", "2"},
                  "--ddp-bucket-size: buckets of 2 parameters make 2116620288 buckets of stage 0's 4233240576 parameters; "
                  "at most 100000 a stage are simulated; use buckets of 42333 parameters or more");
  // plan refuses it once, against the whole model, before the search.
  check_bad_input({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch-size", "512",
                   "--ddp-bucket-size", "2"},
                  "--ddp-bucket-size: buckets of 2 parameters make 4015130624 buckets of the model's 8030261248 "
                  "parameters; at most 100000 a stage are simulated; use buckets of 80303 parameters or more");
  // At the bound it runs: 42,333 parameters a bucket, 100,000 buckets.
  const CliResult r = run_cli({"simulate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--pp", "2", "--dp", "32",
                               "--microbatches", "16", "--ddp-bucket-size", "42333", "--json"});
  INFO(r.err);
  CHECK(r.code == 0);
}

TEST_CASE("serving: prompt chunks count toward the slots bound, and arrivals are bounded in time") {
  check_refused({"serve", "simulate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--max-num-batched-tokens", "1",
                 "--requests", "1000", "--prompt-tokens", "400000", "--output-tokens", "1"},
                "1000 requests: 400,000,000 prompt chunks (of --max-num-batched-tokens 1) and 1,000 output tokens to "
                "simulate; the limit is 50,000,000 together; ",
                "use fewer or shorter requests or a larger token budget");
  check_refused({"serve", "run", "--model", "examples/tiny-llama.json", "--requests", "100000", "--prompt-tokens", "16",
                 "--output-tokens", "500", "--repeat", "1"},
                "100000 requests: 100,000 prompt chunks (of --max-num-batched-tokens 8192) and 50,000,000 output tokens",
                "use fewer or shorter requests or a larger token budget");
  check_refused({"serve", "simulate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--rate", "1e-300", "--requests", "3"},
                "--rate: 1e-300 requests per second spreads 3 requests over about 3e+300 s; ",
                "the longest run taken is 1e+09 s (about 31 years), so give at least 3e-09 per second");
  const std::string trace = std::string(PIPEWRIGHT_TEST_TMP) + "/bounds-far-arrival.jsonl";
  std::ofstream(trace) << "{\"prompt_tokens\": 10, \"output_tokens\": 3, \"arrival_s\": 1e300}\n";
  check_refused({"serve", "simulate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--trace", trace},
                trace + " line 1: arrival_s: 1e+300 s", "is past the longest run taken, 1e+09 s (about 31 years)");
}

TEST_CASE("serve plan: what its search simulates whatever it drops estimated up front, refused past the time limit") {
  // The prefill pools are all simulated, and the --top (5) cheapest configurations before any can be dropped.
  check_refused({"serve", "plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "16384", "--disaggregate",
                 "--requests", "100000", "--prompt-tokens", "4000", "--max-num-batched-tokens", "512"},
                "serve plan: the prefill pools and the 5 cheapest of 3,500 configurations of 16384 GPUs x 100000 requests, "
                "about 87,262,500 simulated steps of 82 layers would take about 11.9 min; the limit is 10.0 min; ",
                "plan fewer GPUs (--gpus), fewer requests or leave out --disaggregate or pass --allow-large");
}

TEST_CASE("serve plan --target-rate: a search at every count of GPUs, estimated together before the first") {
  check_refused({"serve", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "2048", "--ttft-slo", "0.5",
                 "--target-rate", "100"},
                "serve plan: --target-rate's searches at 1 to 2048 GPUs would take about 15.4 min; the limit is 10.0 min; ",
                "give a smaller --gpus to search up to or pass --allow-large");
}

TEST_CASE("a DeepSeek-V3 config with a head size near INT_MAX is refused at load, not planned at peak mem 0 B") {
  std::ifstream in(source_path("examples/deepseek-v3.config.json"));
  const nlohmann::json config = nlohmann::json::parse(in);
  for (const char* field : {"qk_rope_head_dim", "kv_lora_rank", "v_head_dim", "qk_nope_head_dim", "q_lora_rank",
                            "moe_intermediate_size", "hidden_size", "intermediate_size"}) {
    nlohmann::json wide = config;
    wide[field] = 2147483647;
    const std::string path = tmp(std::string("wide-") + field + ".json");
    std::ofstream(path) << wide.dump();
    const std::string message = "--model: " + path + ": " + field +
                                " is 2147483647, above the cap of 1000000 for a layer's size; give at most 1000000";
    check_bad_input({"simulate", "--model", path, "--cluster", "dgx-h100", "--pp", "16", "--microbatches", "32"}, message);
    check_bad_input({"plan", "--model", path, "--cluster", "dgx-h100", "--gpus", "128", "--global-batch-size", "512"},
                    message);
  }
  // The shared experts' width is their count times the expert's: bounded as a product.
  nlohmann::json shared = config;
  shared["n_shared_experts"] = 1000000;
  const std::string path = tmp("wide-shared.json");
  std::ofstream(path) << shared.dump();
  check_bad_input({"simulate", "--model", path, "--cluster", "dgx-h100", "--pp", "16", "--microbatches", "32"},
                  "--model: " + path + ": n_shared_experts x moe_intermediate_size is 2048000000, above the cap of "
                  "1000000 for a layer's size; give fewer shared experts");
}

TEST_CASE("plan of a model of 100,000 layers: its configurations counted with the layers before any is held") {
  std::ifstream in(kLlama);
  nlohmann::json model = nlohmann::json::parse(in);
  model["transformer"]["layers"] = 100000;
  const std::string path = tmp("layers-100000.json");
  std::ofstream(path) << model.dump();
  // Before: 93 s, 6.3 GB, then std::bad_alloc (vpp up to 50,000 for every looped schedule at pp 2).
  check_refused({"plan", "--model", path, "--cluster", "dgx-h100", "--gpus", "64", "--global-batch-size", "64",
                 "--threads", "2"},
                "plan: 8,508,811 configurations of 100,002 layers each (63 cost tables, vpp up to 50001) would take about ",
                "narrow the space (--vpp, --pp, --schedules, --micro-batch-size, --recompute) or pass --allow-large");
}

TEST_CASE("replan of a plan of 50,000 layers: its search estimated up front like plan's") {
  const std::string path = plan_of_blocks(50000);
  check_refused({"replan", "--plan", path, "--failed-nodes", "1", "--threads", "2"},
                "replan: 2,675,914 configurations of 50,002 layers each (45 cost tables, vpp up to 25001) would take about ",
                "plan the 8 GPUs left in a narrower space (pipewright plan --gpus 8 with --vpp, --pp or --schedules) or "
                "pass --allow-large");
}

TEST_CASE("a model file over 64 MiB is refused by its size before it is parsed") {
  const std::string path = tmp("model-70mb.json");
  { std::ofstream(path) << "{"; }
  std::filesystem::resize_file(path, 70L << 20);  // sparse: the size without the writing
  // Before: a 160 MB file was parsed whole (7 s) before its layer count was refused.
  check_bad_input({"simulate", "--model", path, "--cluster", "dgx-h100", "--pp", "2", "--microbatches", "2"},
                  "--model: model file '" + path + "' holds 73,400,320 bytes, above the cap of 67,108,864 (67.1 MB); the "
                  "largest real inputs (a model of 100,000 explicit layers, a million scheduled actions) take about 30 MB");
  std::filesystem::remove(path);
}

TEST_CASE("serve simulate --replicas 2147483647: the idle replicas past the requests cost nothing") {
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_cli({"serve", "simulate", "--model", kLlama, "--cluster", "dgx-h100", "--requests", "16",
                               "--prompt-tokens", "16", "--output-tokens", "8", "--replicas", "2147483647", "--json"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Each of the 16 requests alone on its replica: every one served, as one replica serves one request.
  const CliResult one = run_cli({"serve", "simulate", "--model", kLlama, "--cluster", "dgx-h100", "--requests", "1",
                                 "--prompt-tokens", "16", "--output-tokens", "8", "--json"});
  REQUIRE(one.code == 0);
  CHECK(j.at("ttft_p50_s") == nlohmann::json::parse(one.out).at("ttft_p50_s"));
  CHECK(j.at("makespan_s") == nlohmann::json::parse(one.out).at("makespan_s"));
  CHECK(seconds < 10);  // before: 7 s (2^31 replicas dealt one by one); 7 ms now
}

TEST_CASE("a plan file of a model of 100,000 layers reads back: its split indexes the embedding and head past them") {
  const std::string path = plan_of_blocks(100000);  // its head is layer 100,001
  const CliResult r = run_cli({"simulate", "--plan", path});
  INFO(r.err);
  CHECK(r.code == 0);
}
