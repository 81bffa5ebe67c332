#pragma once
// A disaggregated serving plan (a prefill pool and a decode pool, serving/disaggregated_serving.hpp) as the commands
// that run it: one server per engine, each on its own GPUs, and a router that sends each request to the next
// prefill server and the next decode server in turn, as the simulation assigns them (serving/serving_replicas.hpp).
//
// SGLang (checked at sgl-project/sglang 08edc506: docs/advanced_features/pd_disaggregation.md and router.md, and
// against SGLang 0.5.23's own parser: python/tests/test_serving_exports.py): `--disaggregation-mode
// prefill|decode`, each prefill server's `--disaggregation-bootstrap-port` (8998 by default, one per server here;
// the decode servers read the prefill pool's tp, dp and pp from it, srt/disaggregation/common/conn.py's
// PrefillServerInfo, so no flag names the other pool's shape: 0.5.23 has no --disaggregation-decode-tp or
// --disaggregation-prefill-pp), `--base-gpu-id` for a server that does not start at a node's GPU 0, and `python -m sglang_router.launch_router --pd-disaggregation --prefill URL BOOTSTRAP_PORT --decode URL
// --prefill-policy round_robin --decode-policy round_robin`. An engine wider than a node spans whole nodes with
// --nnodes, --node-rank and --dist-init-addr.
//
// vLLM (checked at vllm-project/vllm 026c83f9: docs/features/nixl_connector_usage.md, vllm/config/kv_transfer.py;
// and vllm-project/router df71929b: docs/cli_reference.md): each server `vllm serve` with
// `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"|"kv_consumer"}'`, its GPUs in
// CUDA_VISIBLE_DEVICES, VLLM_NIXL_SIDE_CHANNEL_HOST/PORT for the NIXL handshake (a port of its own on its node),
// and `vllm-router --vllm-pd-disaggregation --prefill URL --decode URL --prefill-policy round_robin
// --decode-policy round_robin --kv-connector nixl`. An engine wider than a node is refused: vLLM runs one on Ray,
// and the NIXL side channel of a Ray engine's other nodes is not set by these variables.
//
// Node addresses are the shell variables NODE0, NODE1, ... (node i holds the cluster's GPUs i x gpus_per_node on).
#include <string>

#include "planner/serving_plan.hpp"

namespace pw {

// Each pool's servers with its own engine's flags (an engine's defaults depend on its tp and pp). BadInput when
// an engine would straddle two nodes without filling them, or more servers than ports.
std::string sglang_disaggregated_commands(const ServingPlan& plan, const ServingConfig& prefill_engine,
                                          const ServingConfig& decode_engine, const std::string& model, int gpus_per_node);
// BadInput as above, and for an engine wider than a node.
std::string vllm_disaggregated_commands(const ServingPlan& plan, const ServingConfig& prefill_engine,
                                        const ServingConfig& decode_engine, const std::string& model, int gpus_per_node);

}  // namespace pw
