// exports/disaggregated.hpp against the sources it cites: SGLang's PD flags and router
// (sgl-project/sglang 08edc506, docs/advanced_features/pd_disaggregation.md, router.md; in SGLang 0.5.23 the decode
// server reads the prefill pool's shape from its bootstrap server, no flag names it), vLLM's NixlConnector (docs/features/nixl_connector_usage.md, kv_role in
// vllm/config/kv_transfer.py) and vllm-router's PD flags (vllm-project/router docs/cli_reference.md).
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "exports/disaggregated.hpp"
#include "../text_match.hpp"

using namespace pw;

namespace {

ServingPlan split_plan(int prefill_tp, int prefill_pp, int prefill_replicas, int tp, int pp, int replicas) {
  ServingPlan p;
  p.prefill_tp = prefill_tp;
  p.prefill_pp = prefill_pp;
  p.prefill_replicas = prefill_replicas;
  p.tp = tp;
  p.pp = pp;
  p.replicas = replicas;
  return p;
}

ServingConfig limits() {
  ServingConfig e;
  e.max_num_seqs = 256;
  e.max_num_batched_tokens = 4096;
  e.gpu_memory_utilization = 0.85;
  return e;
}

// Every value a flag takes in the text, in order.
std::vector<std::string> values_of(const std::string& text, const std::string& flag) {
  std::vector<std::string> out;
  const std::regex re(flag + " (\\S+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

}  // namespace

TEST_CASE("sglang disaggregated: one server per engine on its GPUs, PD flags per role, a round-robin router") {
  const std::string out = sglang_disaggregated_commands(split_plan(1, 1, 2, 2, 1, 1), limits(), limits(), "m", 8);
  CHECK(out ==
        "# prefill pool: 2 engines of tp 1 x pp 1 on the cluster's GPUs 0-1\n"
        "# decode pool: 1 engine of tp 2 x pp 1 on the cluster's GPUs 2-3\n"
        "# run each server on its node, in a shell of its own; NODE0: the node's address (127.0.0.1 with the router on it too)\n"
        "# KV caches go over SGLang's default transfer backend, mooncake (pip install mooncake-transfer-engine); add\n"
        "# --disaggregation-ib-device where its device detection picks the wrong NICs\n"
        "# prefill server 0: node 0, GPU 0\n"
        "python -m sglang.launch_server --model-path m \\\n"
        "  --disaggregation-mode prefill \\\n  --disaggregation-bootstrap-port 8998 \\\n"
        "  --host 0.0.0.0 \\\n  --port 30000 \\\n  --base-gpu-id 0 \\\n  --tp-size 1 \\\n  --pp-size 1 \\\n"
        "  --max-running-requests 256 \\\n  --chunked-prefill-size 4096 \\\n  --max-prefill-tokens 4096 \\\n"
        "  --mem-fraction-static 0.85 \\\n  --kv-cache-dtype auto\n"
        "# prefill server 1: node 0, GPU 1\n"
        "python -m sglang.launch_server --model-path m \\\n"
        "  --disaggregation-mode prefill \\\n  --disaggregation-bootstrap-port 8999 \\\n"
        "  --host 0.0.0.0 \\\n  --port 30001 \\\n  --base-gpu-id 1 \\\n  --tp-size 1 \\\n  --pp-size 1 \\\n"
        "  --max-running-requests 256 \\\n  --chunked-prefill-size 4096 \\\n  --max-prefill-tokens 4096 \\\n"
        "  --mem-fraction-static 0.85 \\\n  --kv-cache-dtype auto\n"
        "# decode server 0: node 0, GPUs 2-3\n"
        "python -m sglang.launch_server --model-path m \\\n"
        "  --disaggregation-mode decode \\\n"
        "  --host 0.0.0.0 \\\n  --port 30002 \\\n  --base-gpu-id 2 \\\n  --tp-size 2 \\\n  --pp-size 1 \\\n"
        "  --max-running-requests 256 \\\n  --mem-fraction-static 0.85 \\\n  --kv-cache-dtype auto\n"
        "# the router, on any host that reaches the servers: each request to the next prefill and the next decode\n"
        "# server in turn, as simulated; clients send to its port 8000\n"
        "python -m sglang_router.launch_router \\\n  --pd-disaggregation \\\n"
        "  --prefill \"http://$NODE0:30000\" 8998 \\\n  --prefill \"http://$NODE0:30001\" 8999 \\\n"
        "  --decode \"http://$NODE0:30002\" \\\n"
        "  --prefill-policy round_robin \\\n  --decode-policy round_robin \\\n  --host 0.0.0.0 \\\n  --port 8000\n");
}

TEST_CASE("sglang disaggregated: an engine of whole nodes runs one command per node, no flag naming the other pool") {
  // Prefill: 2 engines of tp 4 x pp 2 (node 0, node 1); decode: 1 engine of tp 8 x pp 2 over nodes 2 and 3.
  const std::string out = sglang_disaggregated_commands(split_plan(4, 2, 2, 8, 2, 1), limits(), limits(), "m", 8);
  CHECK(values_of(out, "--disaggregation-mode") == std::vector<std::string>{"prefill", "prefill", "decode", "decode"});
  CHECK(values_of(out, "--disaggregation-decode-tp").empty());
  CHECK(values_of(out, "--disaggregation-prefill-pp").empty());
  CHECK(values_of(out, "--nnodes") == std::vector<std::string>{"2", "2"});
  CHECK(values_of(out, "--node-rank") == std::vector<std::string>{"0", "1"});
  CHECK(values_of(out, "--dist-init-addr") == std::vector<std::string>{"\"$NODE2:5000\"", "\"$NODE2:5000\""});
  CHECK(values_of(out, "--base-gpu-id") == std::vector<std::string>{"0", "0", "0", "0"});
  CHECK(out.find("# decode server 0: node 3 of its 2 (node rank 1)\n") != std::string::npos);
  CHECK(out.find("NODE0..NODE3: the nodes' addresses") != std::string::npos);
  // The router reaches each server on its first node, the prefill ones with their bootstrap ports.
  CHECK(values_of(out, "--prefill") == std::vector<std::string>{"\"http://$NODE0:30000\"", "\"http://$NODE1:30001\""});
  CHECK(values_of(out, "--decode") == std::vector<std::string>{"\"http://$NODE2:30002\""});
  CHECK(count(out, "python -m sglang.launch_server") == 4);
}

TEST_CASE("disaggregated exports refuse what a launcher cannot place") {
  // 12 decode GPUs from GPU 4 of an 8-GPU node: GPUs 4-15 straddle nodes 0 and 1 without filling node 0.
  try {
    sglang_disaggregated_commands(split_plan(4, 1, 1, 4, 3, 1), limits(), limits(), "m", 8);
    FAIL("no refusal");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) ==
          "--export: the decode pool's engine 0 (tp 4 x pp 3, the cluster's GPUs 4-15) would straddle nodes of 8 GPUs "
          "without filling them, which no launcher places; export the best single pool (leave out --disaggregate)");
  }
  try {
    vllm_disaggregated_commands(split_plan(8, 1, 1, 8, 2, 1), limits(), limits(), "m", 8);
    FAIL("no refusal");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "--export vllm: the decode pool's engines (tp 8 x pp 2) are wider than a node's 8 GPUs: vLLM runs such an "
          "engine on Ray, where the NIXL side channel of its other nodes is not set by the variables this export "
          "writes; export sglang, or plan engines of at most 8 GPUs");
  }
  try {
    sglang_disaggregated_commands(split_plan(1, 1, 5000, 1, 1, 5001), limits(), limits(), "m", 8);
    FAIL("no refusal");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "--export: 10001 servers, more than the 10000 whose ports the export numbers apart; plan fewer, wider "
          "engines (--gpus)");
  }
  ServingPlan single;
  CHECK_THROWS_WITH(vllm_disaggregated_commands(single, limits(), limits(), "m", 8),
                    "--export: plan 1 has one pool; it is exported without a router");
}

TEST_CASE("vllm disaggregated: NIXL producers and consumers on their GPUs, side-channel ports apart, vllm-router") {
  ServingConfig e = limits();
  e.kv_dtype = KvCacheDtype::Fp8;
  // Prefill: 4 engines of tp 2 on node 0; decode: 2 engines of tp 4 on node 1.
  const std::string out = vllm_disaggregated_commands(split_plan(2, 1, 4, 4, 1, 2), e, e, "m", 8);
  std::vector<std::string> devices;
  const std::regex re("CUDA_VISIBLE_DEVICES=(\\S+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it) devices.push_back((*it)[1]);
  CHECK(devices == std::vector<std::string>{"0,1", "2,3", "4,5", "6,7", "0,1,2,3", "4,5,6,7"});
  CHECK(count(out, "VLLM_NIXL_SIDE_CHANNEL_HOST=\"$NODE0\"") == 4);
  CHECK(count(out, "VLLM_NIXL_SIDE_CHANNEL_HOST=\"$NODE1\"") == 2);
  CHECK(values_of(out, "--port") == std::vector<std::string>{"20000", "20001", "20002", "20003", "20004", "20005", "8000"});
  CHECK(count(out, "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}'") == 4);
  CHECK(count(out, "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}'") == 2);
  CHECK(values_of(out, "--tensor-parallel-size") == std::vector<std::string>{"2", "2", "2", "2", "4", "4"});
  CHECK(count(out, "--kv-cache-dtype fp8") == 6);
  CHECK(out.find("# decode server 1: node 1, GPUs 4-7\n") != std::string::npos);
  const std::string router = out.substr(out.find("vllm-router \\\n"));
  CHECK(router ==
        "vllm-router \\\n  --vllm-pd-disaggregation \\\n"
        "  --prefill \"http://$NODE0:20000\" \\\n  --prefill \"http://$NODE0:20001\" \\\n"
        "  --prefill \"http://$NODE0:20002\" \\\n  --prefill \"http://$NODE0:20003\" \\\n"
        "  --decode \"http://$NODE1:20004\" \\\n  --decode \"http://$NODE1:20005\" \\\n"
        "  --prefill-policy round_robin \\\n  --decode-policy round_robin \\\n  --kv-connector nixl \\\n"
        "  --host 0.0.0.0 \\\n  --port 8000\n");
}

TEST_CASE("sglang disaggregated: pools of data-parallel attention groups, a server a group with its limits per engine") {
  // Prefill: one group of 4 engines of tp 1 (GPUs 0-3); decode: 2 groups of 2 engines of tp 2 (GPUs 4-7 and 8-11).
  ServingPlan plan = split_plan(1, 1, 1, 2, 1, 2);
  plan.prefill_dp_attention = 4;
  plan.dp_attention = 2;
  ServingConfig decode = limits();
  decode.two_batch_overlap = true;
  const std::string out = sglang_disaggregated_commands(plan, limits(), decode, "m", 8);
  CHECK(values_of(out, "--disaggregation-mode") == std::vector<std::string>{"prefill", "decode", "decode"});
  CHECK(values_of(out, "--tp-size") == std::vector<std::string>{"4", "4", "4"});
  CHECK(values_of(out, "--dp-size") == std::vector<std::string>{"4", "2", "2"});
  CHECK(values_of(out, "--ep-size") == std::vector<std::string>{"4", "4", "4"});
  CHECK(count(out, "--enable-dp-attention") == 3);
  CHECK(count(out, "--moe-a2a-backend deepep") == 3);
  CHECK(count(out, "--enable-two-batch-overlap") == 2);
  CHECK(values_of(out, "--base-gpu-id") == std::vector<std::string>{"0", "4", "0"});
  // SGLang divides the running requests by --dp-size: each engine gets the simulated 256.
  CHECK(values_of(out, "--max-running-requests") == std::vector<std::string>{"1024", "512", "512"});
  CHECK(out.find("# prefill pool: 1 group of 4 data-parallel attention engines of tp 1 (ep 4) on the cluster's GPUs 0-3\n") !=
        std::string::npos);
  CHECK(out.find("# decode pool: 2 groups of 2 data-parallel attention engines of tp 2 (ep 4) on the cluster's GPUs 4-11\n") !=
        std::string::npos);
  // vLLM balances such engines by their queues, not in turn as simulated.
  CHECK_THROWS_WITH(vllm_disaggregated_commands(plan, limits(), decode, "m", 8),
                    "--export vllm: the prefill pool runs 4 data-parallel attention engines, and vLLM's API server sends "
                    "each request to the engine with the fewest waiting x 4 + running requests, not in turn as "
                    "simulated; export sglang");
}
