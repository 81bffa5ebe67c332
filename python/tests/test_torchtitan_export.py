"""torchtitan as the oracle of pipewright's torchtitan export: for each plan, what torchtitan 0.3.0 (the
release on PyPI, pinned in python/requirements.txt) must be told is derived from plan.json alone, then the
exported pipewright_plan_v0_3_0.py is imported, its apply_plan(Trainer.Config()) must set every field to the
plan's value, loading it as `-m torchtitan.train --module ... --config ...` does (ConfigManager, which rebuilds
the dataclasses and reruns their checks) must give the same, torchtitan's own arithmetic (mesh size,
micro-batches and gradient accumulation, stage placement) must give the plan's, the file's guard must refuse
a config class without one of its fields, and the form for torchtitan main must not run on 0.3.0."""

import dataclasses
import importlib
import json
import logging
import sys
from pathlib import Path

import pytest

import pipewright

torchtitan = pytest.importorskip("torchtitan")
from torch.distributed.pipelining.schedules import get_schedule_class  # noqa: E402
from torchtitan.config import ConfigManager  # noqa: E402
from torchtitan.distributed import ParallelDims  # noqa: E402
from torchtitan.distributed.activation_checkpoint import FullAC  # noqa: E402
from torchtitan.distributed.pipeline_parallel import _get_pp_rank_to_stage_indices_mapping  # noqa: E402
from torchtitan.trainer import Trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# torchtitan's warnings about checkpoints and Hugging Face assets.
logging.getLogger().setLevel(logging.ERROR)

MODULE = "pipewright_plan_v0_3_0"
SMALL = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--pp", "2", "--global-batch-size", "16"]
PLANS = {
    # The small plan: interleaved (Interleaved1F1B), FSDP over dp x cp.
    "small": SMALL,
    # The same GPUs with a schedule PyTorch has no class for (a CSV under PipelineScheduleMulti), full
    # recomputation, ZeRO 0 (replicated), micro-batches of 2.
    "csv-full-zero0": SMALL[:-2] + ["--global-batch-size", "32", "--schedules", "zb-h1", "--recompute", "full",
                                    "--zero", "0", "--cp", "1", "--micro-batch-size", "2"],
    # Without pp: the micro-batches are gradient-accumulation steps.
    "no-pp": ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--pp", "1", "--tp", "2",
              "--global-batch-size", "32"],
    # The brief's plan: 16 GPUs, pp 2, tp 2 (cp 2, zb-v).
    "config-json": ["--model", str(ROOT / "examples" / "llama3-8b.config.json"), "--cluster", "dgx-h100", "--gpus", "16",
              "--pp", "2", "--tp", "2", "--global-batch-size", "64"],
}


def export(args, out):
    pipewright.run(["plan", *args, "--top", "1", "--export", "torchtitan", "--export-dir", str(out),
                    "--out", str(out / "plan.json")])
    return json.loads((out / "plan.json").read_text())


def torch_schedule(plan):
    """The get_schedule_class name torchtitan gets for the plan's schedule, and whether a CSV carries it."""
    pc, name = plan["parallel"], plan["schedule"]["name"]
    named = {"gpipe": "GPipe", "1f1b": "1F1B", "zb-v": "ZBVZeroBubble", "dualpipev": "DualPipeV"}
    if name in named:
        return named[name], False
    if name == "interleaved" and plan["schedule"]["group_size"] == pc["pp"]:
        return "Interleaved1F1B", False
    kind = plan["schedule"]["actions"]["placement"]["kind"]
    return ("ZBVZeroBubble" if kind == "v" else "PipelineScheduleMulti"), True


def module_fqns(plan):
    blocks = plan["model"]["transformer"]["layers"]
    out = []
    for stage in plan["split"]["stages"]:
        first, last = stage["layers"]
        names = []
        for i in range(first, last + 1):
            if i == 0:
                names.append("tok_embeddings")
            elif i <= blocks:
                names.append(f"layers.{i - 1}")
            else:
                names += ["norm", "lm_head"]
        out.append(names)
    return out


def expected_fields(plan, export_dir):
    """What torchtitan 0.3.0 must be told for the plan, from plan.json."""
    pc, w = plan["parallel"], plan["workload"]
    replicas = pc["dp"] // pc["dp_shard"] if pc["dp_shard"] else 1
    fsdp = pc["zero"] == 3
    schedule, csv = torch_schedule(plan)
    parallelism = {
        "data_parallel_replicate_degree": replicas if fsdp else pc["dp"],
        "data_parallel_shard_degree": pc["dp"] // replicas if fsdp else 1,
        "tensor_parallel_degree": pc["tp"],
        "enable_sequence_parallel": pc["tp"] > 1 and w["sequence_parallel"],
        "context_parallel_degree": pc["cp"],
        "expert_parallel_degree": pc["ep"],
        "pipeline_parallel_degree": pc["pp"],
        "pipeline_parallel_schedule": schedule,
        "pipeline_parallel_microbatch_size": w["micro_batch_size"],
        "module_fqns_per_model_part": module_fqns(plan),
    }
    if fsdp:
        parallelism["fsdp_reshard_after_forward"] = pc["reshard_after_forward"]
    if csv:
        parallelism["pipeline_parallel_schedule_csv"] = str(export_dir / "pipewright_schedule.csv")
    mbs, m = w["micro_batch_size"], pc["microbatches"]
    training = {
        "local_batch_size": mbs * m if pc["pp"] > 1 else mbs,
        "global_batch_size": plan["global_batch_size"],
        "seq_len": w["seq_len"],
        "disable_cuda_graphs": True,
    }
    return parallelism, training


def load(export_dir, module=MODULE):
    """The exported file `module` freshly imported from export_dir."""
    sys.path.insert(0, str(export_dir))
    try:
        sys.modules.pop(module, None)
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(export_dir))


def check_fields(config, plan, export_dir):
    parallelism, training = expected_fields(plan, export_dir)
    for section, want in (("parallelism", parallelism), ("training", training)):
        got = getattr(config, section)
        for name, value in want.items():
            assert getattr(got, name) == value, f"{section}.{name}: {getattr(got, name)!r}, plan {value!r}"
    ac = config.activation_checkpoint
    if plan["workload"]["recompute"] == "full":
        assert type(ac) is FullAC.Config, ac
    else:
        assert ac is None, ac


def check_torchtitan_arithmetic(config, plan):
    """What torchtitan 0.3.0 computes from the fields (trainer.py, pipeline_parallel.py, parallel_dims.py)."""
    p, t, pc = config.parallelism, config.training, plan["parallel"]
    dims = ParallelDims.from_config(p, world_size=plan["gpus"])  # asserts the degrees multiply to the GPUs
    batch_degree = dims.dp_replicate * dims.dp_shard
    assert batch_degree == pc["dp"], (batch_degree, pc["dp"])
    accumulation = t.global_batch_size // (t.local_batch_size * batch_degree)
    assert t.global_batch_size % (t.local_batch_size * batch_degree) == 0
    microbatches = t.local_batch_size // p.pipeline_parallel_microbatch_size if dims.pp_enabled else 1
    assert microbatches * accumulation == pc["microbatches"], (microbatches, accumulation, pc["microbatches"])
    divisor = (dims.tp if p.enable_sequence_parallel else 1) * (2 * dims.cp if dims.cp > 1 else 1)
    assert t.seq_len % divisor == 0
    if dims.pp_enabled:
        get_schedule_class(p.pipeline_parallel_schedule)  # a name PyTorch knows
        stages = len(p.module_fqns_per_model_part)
        stage_rank = plan["schedule"]["actions"]["placement"]["stage_rank"]
        assert len(stage_rank) == stages
        for rank in range(dims.pp):
            built = _get_pp_rank_to_stage_indices_mapping(rank, dims.pp, p.pipeline_parallel_schedule, stages)
            assert sorted(built) == [s for s in range(stages) if stage_rank[s] == rank], (rank, built)


def check_launch(export_dir, plan):
    """`-m torchtitan.train --module pipewright_plan_v0_3_0 --config pipewright_plan`, up to the trainer: tyro
    rebuilds the config (Trainer.Config.__post_init__ and the field checks run again)."""
    sys.path.insert(0, str(export_dir))
    try:
        sys.modules.pop(MODULE, None)
        config = ConfigManager().parse_args(["--module", MODULE, "--config", "pipewright_plan"])
    finally:
        sys.path.remove(str(export_dir))
    check_fields(config, plan, export_dir)
    assert config.model_spec.flavor == "8B"


def check_guard(module):
    """A config class without one of the fields (a dataclass without slots, where setattr would just add it)."""
    config = Trainer.Config()
    kept = [(f.name, f.type, dataclasses.field(default=getattr(config.parallelism, f.name)))
            for f in dataclasses.fields(config.parallelism) if f.name != "pipeline_parallel_microbatch_size"]
    Loose = dataclasses.make_dataclass("ParallelismConfig", kept)
    loose = Loose()
    loose.pipeline_parallel_microbatch_size = 4  # the trap: no error, and nothing reads it
    config.parallelism = Loose()
    try:
        module.apply_plan(config)
    except AttributeError as e:
        assert "pipeline_parallel_microbatch_size" in str(e) and "0.3.0" in str(e), e
        assert not hasattr(config.parallelism, "pipeline_parallel_microbatch_size")
        assert config.parallelism.pipeline_parallel_degree == 1, "a field was set before the refusal"
    else:
        raise AssertionError("apply_plan set a field the config class lacks")


def check_main_form_on_030(export_dir):
    """What the main form does on 0.3.0's slotted dataclasses."""
    main = load(export_dir, "pipewright_plan")
    with pytest.raises(AttributeError, match="num_pp_microbatches"):
        main.apply_plan(Trainer.Config())


@pytest.mark.parametrize("name", list(PLANS))
def test_torchtitan_runs_the_plan(name, tmp_path):
    plan = export(PLANS[name], tmp_path)
    module = load(tmp_path)
    assert module.WRITTEN_FOR == torchtitan.__version__
    config = module.apply_plan(Trainer.Config())
    check_fields(config, plan, tmp_path)
    dataclasses.replace(config)  # Trainer.Config.__post_init__ on the plan's values
    check_torchtitan_arithmetic(config, plan)
    check_launch(tmp_path, plan)
    check_guard(module)
    check_main_form_on_030(tmp_path)
