// exports/vllm.hpp against vLLM's EngineArgs (vllm/engine/arg_utils.py at 99d7eb5d): field names as flags,
// booleans as --x / --no-x, an engine across nodes on Ray.
#include <catch2/catch.hpp>

#include "exports/vllm.hpp"

using namespace pw;

TEST_CASE("vllm serve command: one engine over two nodes runs on Ray") {
  ServingPlan p;
  p.tp = 8;
  p.pp = 2;
  p.replicas = 1;
  ServingConfig e;
  e.max_num_seqs = 1024;
  e.max_num_batched_tokens = 8192;
  e.gpu_memory_utilization = 0.85;
  CHECK(vllm_serve_command(p, e, "meta-llama/Llama-3.1-70B", 8, false) ==
        "# one engine spans 16 GPUs, more than a node's 8: start a Ray cluster over its nodes and run\n"
        "# this on its head node\n"
        "vllm serve meta-llama/Llama-3.1-70B \\\n"
        "  --tensor-parallel-size 8 \\\n"
        "  --pipeline-parallel-size 2 \\\n"
        "  --distributed-executor-backend ray \\\n"
        "  --max-num-seqs 1024 \\\n"
        "  --max-num-batched-tokens 8192 \\\n"
        "  --enable-chunked-prefill \\\n"
        "  --gpu-memory-utilization 0.85 \\\n"
        "  --kv-cache-dtype auto\n");
  p.pp = 1;
  p.replicas = 1;
  e.chunked_prefill = false;
  e.kv_dtype = KvCacheDtype::Fp8;
  CHECK(vllm_serve_command(p, e, "m", 8, false) ==
        "vllm serve m \\\n  --tensor-parallel-size 8 \\\n  --pipeline-parallel-size 1 \\\n  --max-num-seqs 1024 \\\n"
        "  --max-num-batched-tokens 8192 \\\n  --no-enable-chunked-prefill \\\n  --gpu-memory-utilization 0.85 \\\n"
        "  --kv-cache-dtype fp8\n");
}
