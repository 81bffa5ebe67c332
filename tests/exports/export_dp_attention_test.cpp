// A data-parallel attention plan as SGLang runs it (sgl-project/sglang server_args.py: --enable-dp-attention,
// --dp-size, --ep-size, --moe-a2a-backend, --load-balance-method round_robin; _handle_data_parallelism divides
// --chunked-prefill-size by --dp-size and model_runner's _resolve_max_num_reqs divides --max-running-requests by
// it), and vLLM's refusal (its DPLBAsyncMPClient in vllm/v1/engine/core_client.py balances by queue lengths).
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "exports/sglang.hpp"
#include "exports/vllm.hpp"

using namespace pw;

namespace {

ServingPlan dp_attention_plan(int tp, int dp) {
  ServingPlan p;
  p.tp = tp;
  p.dp_attention = dp;
  return p;
}

}  // namespace

TEST_CASE("sglang dp attention: every GPU in --tp-size, --dp-size engines, experts over all, per-engine limits times dp") {
  ServingConfig e;
  e.max_num_seqs = 256;
  e.max_num_batched_tokens = 4096;
  e.gpu_memory_utilization = 0.85;
  CHECK(sglang_launch_commands(dp_attention_plan(2, 4), e, "m", 8) ==
        "python -m sglang.launch_server --model-path m \\\n"
        "  --tp-size 8 \\\n  --pp-size 1 \\\n  --dp-size 4 \\\n  --enable-dp-attention \\\n  --ep-size 8 \\\n"
        "  --moe-a2a-backend deepep \\\n  --load-balance-method round_robin \\\n"
        "  --max-running-requests 1024 \\\n  --chunked-prefill-size 16384 \\\n  --max-prefill-tokens 4096 \\\n"
        "  --enable-mixed-chunk \\\n  --mem-fraction-static 0.85 \\\n  --kv-cache-dtype auto\n");
  // Over two nodes: one command per node, as for one engine.
  const std::string wide = sglang_launch_commands(dp_attention_plan(1, 16), e, "m", 8);
  CHECK(wide.find("# 16 GPUs over 2 nodes") == 0);
  CHECK(wide.find("--tp-size 16 \\\n  --pp-size 1 \\\n  --dp-size 16 \\\n  --enable-dp-attention \\\n  --ep-size 16") !=
        std::string::npos);
  CHECK(wide.find("--node-rank 1 \\\n") != std::string::npos);
}

TEST_CASE("sglang dp attention groups: a server per group on its GPUs, a round-robin router over them") {
  ServingConfig e;
  e.max_num_seqs = 256;
  e.max_num_batched_tokens = 4096;
  e.gpu_memory_utilization = 0.85;
  ServingPlan p = dp_attention_plan(2, 2);
  p.replicas = 4;  // 4 groups of 4 GPUs: two on each node
  const std::string out = sglang_launch_commands(p, e, "m", 8);
  CHECK(out.rfind("# 4 groups of 2 data-parallel attention engines of tp 2 (ep 4), a server each\n"
                  "# run each server on its node, in a shell of its own; NODE0..NODE1: the nodes' addresses",
                  0) == 0);
  CHECK(out.find("# group 3: node 1, GPUs 4-7\npython -m sglang.launch_server --model-path m \\\n  --tp-size 4 \\\n"
                 "  --pp-size 1 \\\n  --dp-size 2 \\\n  --enable-dp-attention \\\n  --ep-size 4") != std::string::npos);
  CHECK(out.find("  --port 30003 \\\n  --base-gpu-id 4\n") != std::string::npos);
  CHECK(out.substr(out.find("python -m sglang_router.launch_router")) ==
        "python -m sglang_router.launch_router \\\n  --worker-urls \\\n    \"http://$NODE0:30000\" \\\n"
        "    \"http://$NODE0:30001\" \\\n    \"http://$NODE1:30002\" \\\n    \"http://$NODE1:30003\" \\\n"
        "  --policy round_robin \\\n  --host 0.0.0.0 \\\n  --port 8000\n");
  // Groups of 12 GPUs on 8-GPU nodes: the first fills node 0 and half of node 1.
  ServingPlan wide = dp_attention_plan(1, 12);
  wide.replicas = 2;
  try {
    sglang_launch_commands(wide, e, "m", 8);
    FAIL("no refusal");
  } catch (const Error& err) {
    CHECK(std::string(err.what()) ==
          "--export: data-parallel attention group 0 (12 engines of tp 1, the cluster's GPUs 0-11) would straddle "
          "nodes of 8 GPUs without filling them, which no launcher places; plan groups that fit in a node or fill "
          "whole nodes");
  }
}

TEST_CASE("vllm refuses a dp attention plan: its front end balances by queue lengths, not in turn") {
  try {
    vllm_serve_command(dp_attention_plan(1, 8), ServingConfig{}, "m", 8, false);
    FAIL("no refusal");
  } catch (const Error& err) {
    CHECK(err.kind() == ErrorKind::BadInput);
    CHECK(std::string(err.what()) ==
          "--export vllm: plan 1 runs 8 data-parallel attention engines, and vLLM's API server sends each request to "
          "the engine with the fewest waiting x 4 + running requests (DPLBAsyncMPClient, vllm/v1/engine/core_client.py), "
          "not in turn as simulated; export sglang (--load-balance-method round_robin)");
  }
}
