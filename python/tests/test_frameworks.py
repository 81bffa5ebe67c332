"""The training frameworks as the oracle of pipewright's exports: the files `plan --export` writes are read by
the real packages (pinned in python/requirements.txt), not by rules pipewright encodes itself.

- DeepSpeed: the exported `pipeline_module(layers)` builds DeepSpeed's own PipelineModule on gloo ranks, one
  per pipeline stage, whose partition (`module.parts`) must be the plan's split, and DeepSpeedConfig reads
  ds_config.json into the plan's batch.
- megatron-core: the exported Megatron-LM arguments become a TransformerConfig as Megatron-LM's
  core_transformer_config_from_args builds it (megatron/training/argument_utils.py, Megatron-LM d98e8a64: every
  argument named like a config field, and the few it translates), whose __post_init__ checks them; the layout
  is read by megatron-core's PipelineParallelLayerLayout into the plan's split. megatron-core ships no
  megatron/training, so Megatron-LM's own parser is not run here (tests/exports/megatron_launch_test.cpp
  holds the flags to the list read from its source)."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import typing
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

import pipewright
from pipewright.torch.pipelining import free_port

deepspeed = pytest.importorskip("deepspeed")
megatron_core = pytest.importorskip("megatron.core")

# A small Llama: DeepSpeed's ranks build every layer to count parameters, so the model must fit a CPU.
SMALL_LLAMA = {"model_type": "llama", "_name_or_path": "small-llama", "hidden_size": 256, "intermediate_size": 688,
               "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 1024,
               "max_position_embeddings": 256, "tie_word_embeddings": False}


SMALL_MIXTRAL = {**SMALL_LLAMA, "model_type": "mixtral", "_name_or_path": "small-mixtral", "num_local_experts": 8,
                 "num_experts_per_tok": 2}


def export(tmp_path: Path, target: str, model: dict = SMALL_LLAMA, **settings) -> tuple[dict, Path]:
    out = tmp_path / target
    planned = pipewright.plan(model=model, cluster="dgx-h100", export=target, export_dir=out, top=1, **settings)
    return planned["plans"][0], out


def stage_bounds(plan: dict) -> list[int]:
    """The plan's layer ranges (inclusive, one a stage) as DeepSpeed's parts: stage s holds parts[s]..parts[s+1]-1."""
    return [r[0] for r in plan["layer_ranges"]] + [plan["layer_ranges"][-1][1] + 1]


# --- DeepSpeed ---------------------------------------------------------------------------------------------


def _deepspeed_rank(rank: int, world: int, port: int, export_dir: str, results) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import transformers
    from deepspeed.pipe import LayerSpec
    from deepspeed.runtime.config import DeepSpeedConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm

    deepspeed.init_distributed(dist_backend="gloo")
    spec = importlib.util.spec_from_file_location("pipewright_partition", os.path.join(export_dir, "pipewright_partition.py"))
    partition = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(partition)
    config = transformers.LlamaConfig(**{k: v for k, v in SMALL_LLAMA.items() if k not in ("model_type", "_name_or_path")})

    class Head(torch.nn.Sequential):
        def __init__(self, c):
            super().__init__(LlamaRMSNorm(c.hidden_size), torch.nn.Linear(c.hidden_size, c.vocab_size, bias=False))

    # pipewright's layer list: the embedding, the blocks, the head (final norm and output projection).
    layers = ([LayerSpec(torch.nn.Embedding, config.vocab_size, config.hidden_size)] +
              [LayerSpec(LlamaDecoderLayer, config, i) for i in range(config.num_hidden_layers)] + [LayerSpec(Head, config)])
    module = partition.pipeline_module(layers, loss_fn=torch.nn.CrossEntropyLoss())
    ds = DeepSpeedConfig(json.loads(Path(export_dir, "ds_config.json").read_text()), mpu=module.mpu())
    results.put((rank, [int(p) for p in module.parts], ds.train_batch_size, ds.train_micro_batch_size_per_gpu,
                 ds.gradient_accumulation_steps))


def run_deepspeed(export_dir: Path, world: int) -> list:
    context = mp.get_context("spawn")
    results = context.Queue()
    port = free_port()
    ranks = [context.Process(target=_deepspeed_rank, args=(r, world, port, str(export_dir), results)) for r in range(world)]
    for p in ranks:
        p.start()
    try:
        got = sorted(results.get(timeout=240) for _ in ranks)
    finally:
        for p in ranks:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in ranks), [p.exitcode for p in ranks]
    return got


@pytest.mark.parametrize("pp", [2, 3, 4])
def test_deepspeed_partitions_the_plans_split(tmp_path, pp):
    plan, out = export(tmp_path, "deepspeed", gpus=pp, pp=pp, global_batch_size=16)
    assert plan["pp"] == pp and plan["dp"] == 1
    method = "partition_method=" in (out / "pipewright_partition.py").read_text().split("def pipeline_module")[1]
    for rank, parts, batch, micro_batch, steps in run_deepspeed(out, pp):
        assert parts == stage_bounds(plan), f"rank {rank}, {'partition_method' if method else 'PARTS'}"
        assert (batch, micro_batch, steps) == (16, plan["micro_batch_size"], plan["microbatches"])


# --- megatron-core -----------------------------------------------------------------------------------------

# Megatron-LM flags whose argparse destination is not the name: store_false flags.
_STORE_FALSE = {"disable_bias_linear": "add_bias_linear"}
# Flags read by the model builder, the data loader and the training loop, not by TransformerConfig.
_TRAINING_FLAGS = {"seq_length", "micro_batch_size", "global_batch_size", "max_position_embeddings",
                   "position_embedding_type", "untie_embeddings_and_output_weights", "use_distributed_optimizer",
                   "overlap_grad_reduce", "overlap_param_gather", "ddp_bucket_size", "use_tp_pp_dp_mapping",
                   "bf16", "swiglu", "squared_relu", "group_query_attention", "num_query_groups",
                   "num_virtual_stages_per_pipeline_rank", "num_experts", "use_precision_aware_optimizer",
                   "exp_avg_dtype", "exp_avg_sq_dtype", "num_distributed_optimizer_instances",
                   "grad_reduce_in_bf16"}


def megatron_arguments(path: Path) -> dict:
    """The bash array PIPEWRIGHT_MEGATRON_ARGS as {argparse destination: value or True}."""
    text = path.read_text()
    body = text[text.index("PIPEWRIGHT_MEGATRON_ARGS=(") + len("PIPEWRIGHT_MEGATRON_ARGS=("):text.rindex(")")]
    tokens = shlex.split(body)
    args: dict = {}
    for i, token in enumerate(tokens):
        if not token.startswith("--"):
            continue
        value = tokens[i + 1] if i + 1 < len(tokens) and not tokens[i + 1].startswith("--") else True
        name = token[2:].replace("-", "_")
        if name in _STORE_FALSE:
            args[_STORE_FALSE[name]] = False
        else:
            args[name] = value
    return args


def _typed(name: str, hint, value):
    """A flag's text as the field's type (Megatron-LM's parser gives it so)."""
    if value is True or value is False:
        return value
    if name == "attention_backend":
        from megatron.core.transformer.enums import AttnBackend
        return AttnBackend[value]
    kinds = typing.get_args(hint) or (hint,)
    if bool in kinds:
        return value not in ("0", "false", "False")
    if int in kinds:
        return int(value)
    if float in kinds:
        return float(value)
    return value


def transformer_config(args: dict):
    """core_transformer_config_from_args (Megatron-LM d98e8a64) for the flags pipewright writes."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    fields = typing.get_type_hints(TransformerConfig)
    unread = set(args) - set(fields) - _TRAINING_FLAGS
    assert not unread, f"flags neither a TransformerConfig field nor a training flag: {sorted(unread)}"
    kw = {name: _typed(name, fields[name], value) for name, value in args.items() if name in fields}
    if args.get("bf16"):  # validate_args: params_dtype bf16, which the pipeline's dtype follows
        kw["params_dtype"] = kw["pipeline_dtype"] = torch.bfloat16
    if args.get("swiglu"):
        kw["activation_func"] = torch.nn.functional.silu
        kw["gated_linear_unit"] = True
    kw["num_query_groups"] = int(args["num_query_groups"]) if args.get("group_query_attention") else None
    if "num_virtual_stages_per_pipeline_rank" in args:
        kw["virtual_pipeline_model_parallel_size"] = int(args["num_virtual_stages_per_pipeline_rank"])
    if "num_experts" in args:
        kw["num_moe_experts"] = int(args["num_experts"])
    kw["deallocate_pipeline_outputs"] = True
    return TransformerConfig(**kw)


def layout_split(config, pp: int) -> list[int]:
    """Transformer layers per virtual stage (stage i = chunk i // pp of rank i % pp), as megatron-core reads
    the layout; Megatron's even split where no layout is given."""
    layout = config.pipeline_model_parallel_layout
    if layout is None:
        stages = pp * (config.virtual_pipeline_model_parallel_size or 1)
        return [config.num_layers // stages] * stages
    from megatron.core.transformer.enums import LayerType
    layout.validate_layer_layout(num_layers=config.num_layers, mtp_num_layers=config.mtp_num_layers or 0)
    return [layout.layout[i % pp][i // pp].count(LayerType.decoder)
            for i in range(pp * layout.virtual_pipeline_model_parallel_size)]


@pytest.mark.parametrize("settings", [
    dict(gpus=8, tp=2, pp=4, global_batch_size=16),
    dict(gpus=8, pp=2, vpp=2, schedule="interleaved", global_batch_size=16),
    dict(gpus=16, tp=2, pp=2, dp=4, recompute="full", global_batch_size=32),
], ids=["tp2-pp4", "pp2-vpp2", "full-recompute"])
def test_megatron_core_takes_the_exported_settings(tmp_path, settings):
    plan, out = export(tmp_path, "megatron", **settings)
    args = megatron_arguments(out / "megatron_args.sh")
    config = transformer_config(args)
    assert (config.tensor_model_parallel_size, config.pipeline_model_parallel_size) == (plan["tp"], plan["pp"])
    assert (config.virtual_pipeline_model_parallel_size or 1) == plan["vpp"]
    assert config.context_parallel_size == plan["cp"]
    assert config.sequence_parallel == (plan["tp"] > 1)
    assert config.num_layers == SMALL_LLAMA["num_hidden_layers"]
    assert (config.hidden_size, config.ffn_hidden_size, config.num_attention_heads, config.num_query_groups) == (
        256, 688, 8, 4)
    assert config.gated_linear_unit and config.normalization == "RMSNorm" and not config.add_bias_linear
    assert config.recompute_granularity == (None if plan["recompute"] == "none" else plan["recompute"])
    assert layout_split(config, plan["pp"]) == plan["split"]
    assert int(args["micro_batch_size"]) * plan["microbatches"] * plan["dp"] == int(args["global_batch_size"])


def test_megatron_core_takes_the_exported_experts(tmp_path):
    plan, out = export(tmp_path, "megatron", model=SMALL_MIXTRAL, gpus=8, pp=2, ep=4, global_batch_size=16)
    args = megatron_arguments(out / "megatron_args.sh")
    config = transformer_config(args)
    assert (config.num_moe_experts, config.moe_router_topk, config.expert_model_parallel_size) == (8, 2, plan["ep"])
    assert config.moe_ffn_hidden_size == 688
    assert layout_split(config, plan["pp"]) == plan["split"]


def test_versions_named():
    # The versions these checks ran against, as docs/python.md names them.
    assert deepspeed.__version__ == "0.19.8"
    import megatron.core
    assert megatron.core.__version__ == "0.16.1"
