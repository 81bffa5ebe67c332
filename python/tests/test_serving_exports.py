"""The serving engines as the oracle of `serve plan --export vllm|sglang`: every command the export writes is
parsed by the engine's own parser (vLLM 0.33.0's `vllm serve`, SGLang 0.5.23's `sglang.launch_server`, the
SGLang router 0.3.2's `launch_router`; python/requirements-parsers.txt), passes the checks the engine runs on
parsed arguments, and gives the engine the plan's configuration: tp, pp, data-parallel ranks or replicas, the
batch limits. The parsers need no GPU: vLLM is told its platform is the CPU (VLLM_TARGET_DEVICE), as its
platform detection would otherwise find no device."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import pipewright  # noqa: E402

vllm = pytest.importorskip("vllm")
sglang = pytest.importorskip("sglang")
from sglang.srt.server_args import ServerArgs  # noqa: E402
from sglang_router.launch_router import RouterArgs  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = dict(model=str(ROOT / "examples" / "llama3.1-70b.config.json"), requests=256, prompt_tokens=1024,
                output_tokens=128)
TWO_NODES = str(ROOT / "examples" / "cluster-2x-h100.json")
# What the commands leave to the user, filled in as a user would.
SHELL = {'"$MODEL"': "/models/llama-3.1-70b", '"$HEAD"': "10.0.0.1", '"$NODE0"': "10.0.0.1", '"$NODE1"': "10.0.0.2",
         '"$DRAFT_MODEL"': "/models/eagle-head", '\\"$DRAFT_MODEL\\"': '\\"/models/eagle-head\\"'}


def commands(text: str, start: str) -> list[list[str]]:
    """The commands in an export's text that begin with `start`, each as its words (continuations joined,
    comments left out, the user's variables filled in)."""
    found, current = [], None
    for line in text.splitlines():
        if current is None and line.startswith(start):
            current = line
        elif current is not None:
            current += "\n" + line
        if current is not None and not line.rstrip().endswith("\\"):
            joined = current.replace("\\\n", " ")
            for variable, value in SHELL.items():
                joined = joined.replace(variable, value)
            found.append(shlex.split(joined))
            current = None
    return found


def vllm_engine(words: list[str]):
    assert words[:2] == ["vllm", "serve"], words[:2]
    parsed = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(words[2:])
    validate_parsed_serve_args(parsed)
    return parsed, EngineArgs.from_cli_args(parsed)


@pytest.mark.parametrize("gpus", [4, 16], ids=["one-engine", "data-parallel-over-nodes"])
def test_vllm_serve_takes_the_exported_commands(gpus):
    cluster = "dgx-h100" if gpus <= 8 else TWO_NODES
    answer = pipewright.serve_plan(cluster=cluster, gpus=gpus, export="vllm", **WORKLOAD)
    plan = answer["plans"][0]
    launched = commands(answer["vllm_command"], "vllm serve")
    assert launched, answer["vllm_command"]
    engines = 0
    for words in launched:
        parsed, engine = vllm_engine(words)
        assert (engine.tensor_parallel_size, engine.pipeline_parallel_size) == (plan["tp"], plan["pp"])
        assert engine.enable_chunked_prefill
        assert engine.max_num_seqs > 0 and engine.max_num_batched_tokens > 0
        # One server a replica, or one data-parallel engine of `replicas` ranks over the nodes.
        engines += (engine.data_parallel_size_local or 1) if engine.data_parallel_size > 1 else 1
        if engine.data_parallel_size > 1:
            assert engine.data_parallel_size == plan["replicas"]
    assert engines == plan["replicas"]


def test_sglang_takes_the_exported_servers_and_router():
    answer = pipewright.serve_plan(cluster=TWO_NODES, gpus=16, export="sglang", engine="sglang", **WORKLOAD)
    plan = answer["plans"][0]
    servers = commands(answer["sglang_command"], "python -m sglang.launch_server")
    assert len(servers) == plan["replicas"]
    ports = []
    for words in servers:
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        server = ServerArgs.from_cli_args(parser.parse_args(words[3:]))
        assert (server.tp_size, server.pp_size) == (plan["tp"], plan["pp"])
        assert server.max_running_requests > 0 and server.chunked_prefill_size > 0
        assert 0 < server.mem_fraction_static < 1
        ports.append(server.port)
    assert len(set(ports)) == len(ports)
    routers = commands(answer["sglang_command"], "python -m sglang_router.launch_router")
    if plan["replicas"] > 1:
        (words,) = routers
        parser = argparse.ArgumentParser()
        RouterArgs.add_cli_args(parser)
        router = RouterArgs.from_cli_args(parser.parse_args(words[3:]))
        assert router.policy == "round_robin"
        assert sorted(int(url.rsplit(":", 1)[1]) for url in router.worker_urls) == sorted(ports)


def test_the_attention_backend_and_eager_steps_reach_both_engines(tmp_path):
    """--attention-backend and --enforce-eager as each engine's parser reads them: vLLM's EngineArgs.attention_backend
    and enforce_eager, SGLang's attention_backend and both CUDA-graph phases disabled."""
    vllm_tables = ROOT / "tests" / "fixtures" / "kernels" / "h200_sxm-vllm"
    answer = pipewright.serve_plan(cluster="hgx-h200", gpus=4, top=1, export="vllm", kernels=str(vllm_tables),
                                   attention_backend="FLASH_ATTN", enforce_eager=True, **WORKLOAD)
    (words,) = commands(answer["vllm_command"], "vllm serve")
    _, engine = vllm_engine(words)
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    assert AttentionBackendEnum[str(engine.attention_backend)] == AttentionBackendEnum.FLASH_ATTN
    assert engine.enforce_eager
    # SGLang's tables name its backends as it does: the same measured rows, relabelled fa3.
    sglang_tables = tmp_path / "h200_sxm-sglang"
    sglang_tables.mkdir()
    for f in vllm_tables.iterdir():
        text = f.read_text().replace('"software": "vllm"', '"software": "sglang"').replace("vllm_flash_attn_fa3", "fa3")
        (sglang_tables / f.name).write_text(text)
    answer = pipewright.serve_plan(cluster="hgx-h200", gpus=4, top=1, export="sglang", engine="sglang",
                                   kernels=str(sglang_tables), attention_backend="fa3", enforce_eager=True, **WORKLOAD)
    for words in commands(answer["sglang_command"], "python -m sglang.launch_server"):
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        server = ServerArgs.from_cli_args(parser.parse_args(words[3:]))
        assert server.attention_backend == "fa3"
        assert (server.cuda_graph_backend_decode, server.cuda_graph_backend_prefill) == ("disabled", "disabled")


def test_speculative_decoding_reaches_both_engines():
    """--speculative-tokens as each engine's parser reads it: vLLM's speculative config (method, head, tokens),
    SGLang's EAGLE settings (K one-token steps, K + 1 tokens verified, the head's path)."""
    settings = dict(cluster="hgx-h200", gpus=4, top=1, speculative_tokens=3, acceptance_rate=0.8,
                    speculative_method="eagle", **WORKLOAD)
    answer = pipewright.serve_plan(export="vllm", **settings)
    (words,) = commands(answer["vllm_command"], "vllm serve")
    _, engine = vllm_engine(words)
    assert engine.speculative_config == {"method": "eagle", "model": "/models/eagle-head", "num_speculative_tokens": 3}
    answer = pipewright.serve_plan(export="sglang", engine="sglang", **settings)
    for words in commands(answer["sglang_command"], "python -m sglang.launch_server"):
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        server = ServerArgs.from_cli_args(parser.parse_args(words[3:]))
        assert (server.speculative_algorithm, server.speculative_num_steps, server.speculative_eagle_topk,
                server.speculative_num_draft_tokens) == ("EAGLE", 3, 1, 4)
        assert server.speculative_draft_model_path == "/models/eagle-head"


def test_versions_named():
    from importlib.metadata import version
    assert (vllm.__version__, version("sglang"), version("sglang-router")) == ("0.33.0", "0.5.23", "0.3.2")


def test_sglang_takes_a_data_parallel_attention_group_on_deepeps_kernels():
    """A mixture of experts' plan 1 with data-parallel attention: SGLang's parser reads the group as simulated, its
    all-to-alls on DeepEP's kernels in SGLang's default mode (normal kernels for a step with prefills, low-latency
    ones for decodes alone), which is how a table-priced simulation times its steps."""
    answer = pipewright.serve_plan(model="deepseek-v3", cluster=TWO_NODES, gpus=16, quantization="fp8", requests=256,
                                   prompt_tokens=1024, output_tokens=128, rate=20, top=1, engine="sglang",
                                   export="sglang")
    plan = answer["plans"][0]
    assert plan["dp_attention"] > 1
    for words in commands(answer["sglang_command"], "python -m sglang.launch_server"):
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        parsed = parser.parse_args(words[3:])
        assert parsed.enable_dp_attention and parsed.dp_size == plan["dp_attention"]
        assert parsed.moe_a2a_backend == "deepep" and parsed.deepep_mode == "auto"
        assert parsed.ep_size == plan["ep"] == parsed.tp_size


def test_sglang_takes_two_batch_overlap_and_redundant_experts():
    """The data-parallel attention group as simulated with SGLang's two-batch overlap and EPLB's redundant expert
    slots: the export carries both, and SGLang's parser reads them back."""
    answer = pipewright.serve_plan(model="deepseek-v3", cluster=TWO_NODES, gpus=16, quantization="fp8", requests=256,
                                   prompt_tokens=1024, output_tokens=128, rate=20, top=1, engine="sglang",
                                   export="sglang", two_batch_overlap=True, redundant_experts=16)
    plan = answer["plans"][0]
    assert plan["dp_attention"] > 1
    launched = commands(answer["sglang_command"], "python -m sglang.launch_server")
    assert launched, answer["sglang_command"]
    for words in launched:
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        parsed = parser.parse_args(words[3:])
        assert parsed.enable_two_batch_overlap
        assert parsed.ep_num_redundant_experts == 16
        assert parsed.moe_a2a_backend == "deepep" and parsed.ep_size == plan["ep"]


def test_a_disaggregated_plan_reaches_sglang_whole():
    """A split plan 1 (a 6 ms TPOT only decode pools free of prefills meet): every server SGLang's parser reads with
    its role, tp and pp as planned, and the router its prefill and decode servers with their bootstrap ports."""
    answer = pipewright.serve_plan(model="llama3-8b", cluster="dgx-h100", gpus=4, requests=128, prompt_tokens=2048,
                                   output_tokens=64, rate=40, tpot_slo=0.006, disaggregate=True, top=1,
                                   engine="sglang", export="sglang")
    plan = answer["plans"][0]
    assert plan["prefill_pool"] is not None
    roles = {"prefill": [], "decode": []}
    for words in commands(answer["sglang_command"], "python -m sglang.launch_server"):
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        server = parser.parse_args(words[3:])
        roles[server.disaggregation_mode].append(server)
    pool = plan["prefill_pool"]
    assert len(roles["prefill"]) == pool["replicas"] and len(roles["decode"]) == plan["replicas"]
    assert all((s.tp_size, s.pp_size) == (pool["tp"], pool["pp"]) for s in roles["prefill"])
    assert all((s.tp_size, s.pp_size) == (plan["tp"], plan["pp"]) for s in roles["decode"])
    (words,) = commands(answer["sglang_command"], "python -m sglang_router.launch_router")
    parser = argparse.ArgumentParser()
    RouterArgs.add_cli_args(parser)
    router = RouterArgs.from_cli_args(parser.parse_args(words[3:]))
    assert router.pd_disaggregation
    assert len(router.prefill_urls) == pool["replicas"] and len(router.decode_urls) == plan["replicas"]
    assert sorted(port for _, port in router.prefill_urls) == sorted(s.disaggregation_bootstrap_port
                                                                   for s in roles["prefill"])


def test_a_disaggregated_plan_reaches_vllm_whole():
    """The same split plan 1 for vLLM: each server's engine as planned, a NIXL producer or consumer."""
    answer = pipewright.serve_plan(model="llama3-8b", cluster="dgx-h100", gpus=4, requests=128, prompt_tokens=2048,
                                   output_tokens=64, rate=40, tpot_slo=0.006, disaggregate=True, top=1,
                                   engine="vllm", export="vllm")
    plan = answer["plans"][0]
    pool = plan["prefill_pool"]
    assert pool is not None
    roles = {"kv_producer": [], "kv_consumer": []}
    for words in commands(answer["vllm_command"], "vllm serve"):
        _, engine = vllm_engine(words)
        roles[engine.kv_transfer_config.kv_role].append(engine)
        assert engine.kv_transfer_config.kv_connector == "NixlConnector"
    assert len(roles["kv_producer"]) == pool["replicas"] and len(roles["kv_consumer"]) == plan["replicas"]
    assert all(e.tensor_parallel_size == pool["tp"] for e in roles["kv_producer"])
    assert all(e.tensor_parallel_size == plan["tp"] for e in roles["kv_consumer"])
