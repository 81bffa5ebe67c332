// The vLLM and SGLang exports of 16-GPU plans, dense and MoE, parsed as a person runs them: each command on the
// node its comment names, the GPUs it takes (CUDA_VISIBLE_DEVICES, --base-gpu-id, --data-parallel-size-local
// engines, whole nodes under Ray or --nnodes), so that every GPU of the plan is used exactly once and each node
// runs the documented processes.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "exports/sglang.hpp"
#include "exports/vllm.hpp"

using namespace pw;

namespace {

constexpr int kGpusPerNode = 8;

struct Command {
  std::string comment;  // the last comment line before it
  std::string text;     // its lines joined
};

std::vector<Command> commands_of(const std::string& script) {
  std::vector<Command> out;
  std::istringstream in(script);
  std::string comment, current;
  for (std::string line; std::getline(in, line);) {
    if (current.empty() && line.rfind("#", 0) == 0) {
      comment = line;
      continue;
    }
    const bool continued = !line.empty() && line.back() == '\\';
    current += (continued ? line.substr(0, line.size() - 1) : line) + " ";
    if (!continued) {
      out.push_back({comment, current});
      current.clear();
    }
  }
  return out;
}

int flag_value(const std::string& text, const std::string& flag, int fallback) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(flag + " +(-?[0-9]+)")) ? std::stoi(m[1]) : fallback;
}

// GPU use count per (node, local GPU) and the processes started per node.
struct Use {
  std::map<std::pair<int, int>, int> gpus;
  std::map<int, int> processes;
};

Use use_of(const std::string& script) {
  Use use;
  const auto take = [&](int node, int first, int count) {
    for (int g = first; g < first + count; ++g) ++use.gpus[{node + g / kGpusPerNode, g % kGpusPerNode}];
  };
  for (const Command& c : commands_of(script)) {
    if (c.text.find("router") != std::string::npos) continue;  // the router takes no GPU
    std::smatch m;
    int node = 0;
    if (std::regex_search(c.comment, m, std::regex("nodes? ([0-9]+)"))) node = std::stoi(m[1]);
    ++use.processes[node];
    const int engine = flag_value(c.text, "--tensor-parallel-size", 0) * flag_value(c.text, "--pipeline-parallel-size", 1) +
                       flag_value(c.text, "--tp-size", 0) * flag_value(c.text, "--pp-size", 1);
    if (std::regex_search(c.text, m, std::regex("CUDA_VISIBLE_DEVICES=([0-9,]+)"))) {
      std::istringstream ids(m[1].str());
      for (std::string id; std::getline(ids, id, ',');) take(node, std::stoi(id), 1);
    } else if (const int local = flag_value(c.text, "--data-parallel-size-local", 0); local > 0) {
      take(node, 0, local * engine);
    } else if (const int nnodes = flag_value(c.text, "--nnodes", 0); nnodes > 0) {
      // One SGLang server over whole nodes: this command's node takes its share.
      const int base = flag_value(c.text, "--base-gpu-id", 0);
      const int replicas = flag_value(c.text, "--dp-size", 1);
      take(node, base, engine * replicas / nnodes);
    } else if (c.text.find("--distributed-executor-backend ray") != std::string::npos) {
      take(node, 0, engine);  // over whole nodes from its head node
    } else {
      const int replicas = c.text.find("--enable-dp-attention") != std::string::npos ? 1 : flag_value(c.text, "--data-parallel-size", flag_value(c.text, "--dp-size", 1));
      take(node, flag_value(c.text, "--base-gpu-id", 0), engine * replicas);
    }
  }
  return use;
}

void check_each_gpu_once(const std::string& script, int gpus) {
  INFO(script);
  const Use use = use_of(script);
  CHECK(static_cast<int>(use.gpus.size()) == gpus);
  for (const auto& [gpu, count] : use.gpus) {
    INFO("node " << gpu.first << ", GPU " << gpu.second);
    CHECK(count == 1);
  }
}

ServingPlan plan(int tp, int pp, int replicas) {
  ServingPlan p;
  p.tp = tp;
  p.pp = pp;
  p.replicas = replicas;
  return p;
}

}  // namespace

TEST_CASE("vLLM: 16 GPUs of dense replicas are data parallelism over two nodes, every GPU once") {
  const std::string script = vllm_serve_command(plan(2, 1, 8), ServingConfig{}, "m", kGpusPerNode, false);
  check_each_gpu_once(script, 16);
  const Use use = use_of(script);
  CHECK(use.processes == std::map<int, int>{{0, 1}, {1, 1}});  // one vllm serve a node, the second headless
  CHECK(script.find("--data-parallel-size 8 \\\n  --data-parallel-size-local 4 \\\n  --data-parallel-address") !=
        std::string::npos);
  CHECK(script.find("--headless") != std::string::npos);
  CHECK(script.find("--data-parallel-start-rank 4") != std::string::npos);
}

TEST_CASE("vLLM: replicas of an MoE model are servers of their own behind a round-robin router, every GPU once") {
  const std::string script = vllm_serve_command(plan(8, 1, 2), ServingConfig{}, "m", kGpusPerNode, true);
  check_each_gpu_once(script, 16);
  CHECK(use_of(script).processes == std::map<int, int>{{0, 1}, {1, 1}});
  CHECK(script.find("--data-parallel-size") == std::string::npos);  // vLLM would step them together
  CHECK(script.find("vllm-router") != std::string::npos);
  CHECK(script.find("--policy round_robin") != std::string::npos);
  // Four replicas of four GPUs: two a node.
  const std::string narrow = vllm_serve_command(plan(4, 1, 4), ServingConfig{}, "m", kGpusPerNode, true);
  check_each_gpu_once(narrow, 16);
  CHECK(use_of(narrow).processes == std::map<int, int>{{0, 2}, {1, 2}});
  CHECK(narrow.find("CUDA_VISIBLE_DEVICES=4,5,6,7") != std::string::npos);
}

TEST_CASE("vLLM: engines that do not divide a node are refused when they would need more nodes than the plan has") {
  // tp 1 x pp 3: two engines a node, so five replicas need three nodes where the plan's 15 GPUs are two.
  CHECK_THROWS_WITH(vllm_serve_command(plan(1, 3, 5), ServingConfig{}, "m", kGpusPerNode, false),
                    "--export vllm: a node of 8 GPUs holds 2 engines of tp 1 x pp 3, so 5 replicas need 3 nodes, not "
                    "the plan's 2; plan engines whose GPUs divide a node's");
}

TEST_CASE("SGLang: 16 GPUs of replicas keep each tp group in a node, a server each behind the router") {
  for (const ServingPlan& p : {plan(8, 1, 2), plan(4, 1, 4), plan(2, 1, 8)}) {
    const std::string script = sglang_launch_commands(p, ServingConfig{}, "m", kGpusPerNode);
    check_each_gpu_once(script, 16);
    CHECK(script.find("--dp-size") == std::string::npos);  // SGLang's own would spread a tp group over the nodes
    CHECK(script.find("--nnodes") == std::string::npos);
    CHECK(script.find("--policy round_robin") != std::string::npos);
    CHECK(use_of(script).processes == std::map<int, int>{{0, 8 / p.tp}, {1, 8 / p.tp}});
  }
  // One engine over both nodes: a command a node.
  const std::string wide = sglang_launch_commands(plan(8, 2, 1), ServingConfig{}, "m", kGpusPerNode);
  check_each_gpu_once(wide, 16);
  CHECK(use_of(wide).processes == std::map<int, int>{{0, 1}, {1, 1}});
}

TEST_CASE("SGLang: an MoE model's 16 GPUs as two data-parallel attention groups, every GPU once") {
  ServingPlan p = plan(1, 1, 2);
  p.dp_attention = 8;
  const std::string script = sglang_launch_commands(p, ServingConfig{}, "m", kGpusPerNode);
  check_each_gpu_once(script, 16);
  CHECK(use_of(script).processes == std::map<int, int>{{0, 1}, {1, 1}});
  CHECK(script.find("--enable-dp-attention") != std::string::npos);
}
