// Bad input to `pipewright simulate`: one line, naming the option and the fix, exit code 2.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "cli_test_util.hpp"
#include "schedules/generators.hpp"

namespace {

void check_error(std::vector<std::string> args, const std::string& message) {
  args.insert(args.begin(), "simulate");
  check_bad_input(args, message);
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = std::string(PIPEWRIGHT_TEST_TMP) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The generators' names, comma-separated, as the message lists them.
std::string known_schedules() {
  std::string out;
  for (const std::string& name : pw::schedule_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

TEST_CASE("an unknown preset names the option and lists the presets") {
  check_error({"--model", "gpt5", "--cluster", "dgx-h100", "--microbatches", "4"},
              "--model: unknown model 'gpt5'; known models: deepseek-v3, gpt-oss-120b, gpt3-1.3b, gpt3-13b, gpt3-175b, "
              "gpt3-2.7b, gpt3-6.7b, llama2-13b, llama2-70b, llama2-7b, llama3-405b, llama3-70b, llama3-8b, "
              "mixtral-8x22b, mixtral-8x7b, qwen3-235b-a22b, qwen3-30b-a3b (or give a path to a config.json or "
              "pipewright model JSON)");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h10", "--microbatches", "8"},
              "--cluster: unknown cluster 'dgx-h10'; known clusters: dgx-a100-40gb, dgx-a100-80gb, dgx-b200, dgx-h100, dgx-h800, gb200-nvl72, hgx-h200, "
              "ideal (or give a path to a cluster JSON file)");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--schedule", "foo", "--microbatches", "8"},
              "--schedule: unknown schedule 'foo'; known: " + known_schedules());
}

TEST_CASE("malformed JSON names the file and the byte") {
  const std::string path = temp_file("truncated-model.json", "{\"name\": \"x\", \"layers\": [");
  check_error({"--model", path, "--cluster", "dgx-h100", "--microbatches", "4"},
              "--model: " + path +
                  ": malformed JSON at byte 26: syntax error while parsing value - unexpected end of input; expected '[', "
                  "'{', or a literal");
}

TEST_CASE("more GPUs than the cluster holds") {
  check_error({"--model", "gpt3-175b", "--cluster", source_path("examples/cluster-2x-h100.json"), "--tp", "8", "--pp", "4",
               "--microbatches", "4"},
              "tp x cp x pp x dp = 32 GPUs but cluster '2x-dgx-h100' has 16 (2 x 8); use fewer GPUs or a cluster file with more "
              "nodes");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--tp", "16", "--microbatches", "8"},
              "--tp: 16 exceeds the 8 GPUs of a node in cluster 'dgx-h100'; tensor parallelism stays inside a node, use "
              "--tp 8 or less");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--tp", "3", "--microbatches", "8"},
              "--tp: 3 does not divide the 16 attention heads of 'gpt3-1.3b'; use a divisor of 16");
}

TEST_CASE("micro-batch counts the schedule or the batch cannot take") {
  check_error({"--model", "gpt3-175b", "--cluster", "dgx-h100", "--tp", "8", "--pp", "4", "--vpp", "2", "--schedule",
               "interleaved", "--microbatches", "6"},
              "--microbatches: interleaved with micro-batch group size 4 needs a multiple of 4, got 6; use 4 or 8");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--pp", "4", "--dp", "2", "--global-batch-size", "99"},
              "--global-batch-size: 99 is not a multiple of micro-batch size x dp = 1 x 2 = 2; use 98 or 100");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100"},
              "give --microbatches (per pipeline) or --global-batch-size (sequences per iteration)");
}

TEST_CASE("layers that cannot be split over the stages") {
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--pp", "64", "--microbatches", "64"},
              "--pp x --vpp = 64 stages but model 'gpt3-1.3b' has only 26 layers; use fewer stages");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--pp", "4", "--split", "6,6,6,5", "--microbatches", "8"},
              "--split: 6 + 6 + 6 + 5 = 23 layers but the model has 24 transformer layers; give numbers that sum to 24");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--pp", "4", "--split", "6,6,6", "--microbatches", "8"},
              "--split: 3 numbers for 4 stages; give one number per stage (per chunk with --vpp)");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--pp", "2", "--split", "12,x", "--microbatches", "8"},
              "--split: 'x' is not a layer count; give transformer layers per stage such as 24,24,24,24");
}

TEST_CASE("unknown modes and malformed numbers") {
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--microbatches", "8", "--recompute", "half"},
              "--recompute: unknown mode 'half'; use none, selective, full or per-stage");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--microbatches", "8", "--tp", "x"},
              "Could not convert: --tp = x");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--microbatches", "0"}, "--microbatches: must be at least 1, got 0");
}

TEST_CASE("an output file never replaces an input") {
  const std::string path = temp_file("model-for-trace.json", "{\"name\": \"two\", \"layers\": [{\"forward_s\": 1}, {\"forward_s\": 1}]}");
  check_error({"--model", path, "--cluster", "ideal", "--pp", "2", "--microbatches", "2", "--trace", path},
              "--trace: '" + path + "' is an input of this command (--model); write the output to another file");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "{\"name\": \"two\", \"layers\": [{\"forward_s\": 1}, {\"forward_s\": 1}]}");
}

TEST_CASE("simulate: fp8 on a GPU without an fp8 peak, or an unknown precision") {
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-a100-80gb", "--microbatches", "4", "--precision", "fp8"},
              "--precision: fp8 needs the GPU's dense fp8 peak; 'A100 SXM 80GB' of cluster 'dgx-a100-80gb' has none (no "
              "fp8 tensor cores, or fp8_peak_tflops not given); use --precision bf16 or such a GPU (H100, H200, B200)");
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--microbatches", "4", "--precision", "fp4"},
              "--precision: unknown 'fp4'; use bf16 or fp8");
}

TEST_CASE("context parallelism and hybrid sharding the run cannot take") {
  check_error({"--model", "llama3-8b", "--cluster", "dgx-h100", "--cp", "3", "--microbatches", "4"},
              "--cp: 3 splits each sequence into 2 x 3 = 6 chunks, which do not divide --seq-len 8192; use a sequence "
              "length that is a multiple of 6");
  check_error({"--model", "llama3-8b", "--cluster", "dgx-h100", "--cp", "2", "--no-flash-attention", "--microbatches", "4"},
              "--cp: context parallelism runs on fused attention (Transformer Engine's ring attention); drop "
              "--no-flash-attention or use --cp 1");
  check_error({"--model", "llama3-8b", "--cluster", "dgx-h100", "--dp", "8", "--dp-shard", "3", "--microbatches", "4"},
              "--dp-shard: 3 does not divide --dp 8; give a divisor of 8 (the dp ranks of one shard group)");
  check_error({"--model", "llama3-8b", "--cluster", "dgx-h100", "--dp", "8", "--dp-shard", "4", "--zero", "0",
               "--microbatches", "4"},
              "--dp-shard: ZeRO-0 shards nothing to replicate; give --zero 1, 2 or 3 with --dp-shard 4");
}

TEST_CASE("simulate --cp 2147483647: its 2 x cp chunks counted without overflow (UBSan found it in the option walk)") {
  check_bad_input({"simulate", "--model", kLlama, "--cluster", "dgx-h100", "--pp", "2", "--microbatches", "4", "--cp",
                   "2147483647"},
                  "--cp: 2147483647 splits each sequence into 2 x 2147483647 = 4294967294 chunks, which do not divide "
                  "--seq-len 32; use a sequence length that is a multiple of 4294967294");
}

TEST_CASE("keeping SwiGLU inputs in fp8: SwiGLU only, as Megatron-Core refuses it, and no export can launch it") {
  check_error({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--microbatches", "4", "--activation-func-fp8-input-store"},
              "--activation-func-fp8-input-store: Megatron-Core keeps only a SwiGLU's input in fp8, and model 'gpt3-1.3b' "
              "has another MLP; leave it out");
  check_bad_input({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "64",
                   "--activation-func-fp8-input-store", "--export", "megatron", "--export-dir", PIPEWRIGHT_TEST_TMP},
                  "--activation-func-fp8-input-store: --export megatron has no flag that keeps the activation inputs in fp8 "
                  "as simulated; leave it out");
}
