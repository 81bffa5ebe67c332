# pipewright 0.1.0: llama3-8b on dgx-h100, 8 GPUs (tp 2, cp 1, pp 2, dp 2), 1f1b schedule; predicted 12.500 s per step, 71.2 GB peak memory.
# torchtitan 0.3.0 (PyPI; branch release/0.3 at 4f9e9a47, Aug 2026): a run is a function returning Trainer.Config. Run this plan with
#   PYTHONPATH=<this folder> torchrun --nproc_per_node=<GPUs per node> ... -m torchtitan.train \
#       --module pipewright_plan_v0_3_0 --config pipewright_plan
# on 8 GPUs in all. module_fqns_per_model_part below assumes 32 transformer layers (layers.0 ..
# layers.31); torchtitan drops any module a stage does not list without a word.
import dataclasses

import torchtitan
from torchtitan.distributed.activation_checkpoint import FullAC
from torchtitan.trainer import Trainer
from torchtitan.models.llama3.config_registry import llama3_8b

# The ParallelismConfig and TrainingConfig fields of torchtitan 0.3.0 (torchtitan/config/configs.py).
WRITTEN_FOR = "0.3.0"
FIELDS = {
    "parallelism": {
        "data_parallel_replicate_degree": 1,
        "data_parallel_shard_degree": 2,
        "fsdp_reshard_after_forward": "default",
        "tensor_parallel_degree": 2,
        "enable_sequence_parallel": True,
        "context_parallel_degree": 1,
        "expert_parallel_degree": 1,
        "pipeline_parallel_degree": 2,
        "pipeline_parallel_schedule": "1F1B",
        "pipeline_parallel_microbatch_size": 2,
        "module_fqns_per_model_part": [
            ["tok_embeddings", "layers.0", "layers.1", "layers.2", "layers.3", "layers.4", "layers.5", "layers.6", "layers.7", "layers.8", "layers.9", "layers.10", "layers.11", "layers.12", "layers.13", "layers.14", "layers.15"],
            ["layers.16", "layers.17", "layers.18", "layers.19", "layers.20", "layers.21", "layers.22", "layers.23", "layers.24", "layers.25", "layers.26", "layers.27", "layers.28", "layers.29", "layers.30", "layers.31", "norm", "lm_head"],
        ],
    },
    "training": {
        "local_batch_size": 16,
        "global_batch_size": 32,
        "seq_len": 8192,
        "disable_cuda_graphs": True,
    },
}


def apply_plan(config: Trainer.Config) -> Trainer.Config:
    # Every field is checked before any is set: one this torchtitan lacks would be a new attribute it never reads
    # (or, on its slotted dataclasses, an error half-way).
    _require(config, ["activation_checkpoint", *FIELDS])
    for section, values in FIELDS.items():
        _require(getattr(config, section), values)
    for section, values in FIELDS.items():
        for name, value in values.items():
            setattr(getattr(config, section), name, value)
    config.activation_checkpoint = None
    return config


def _require(obj, names):
    have = {f.name for f in dataclasses.fields(obj)}
    for name in names:
        if name not in have:
            raise AttributeError(
                f"{type(obj).__qualname__} has no field {name!r}: this plan sets torchtitan {WRITTEN_FOR}'s "
                f"fields (installed: {torchtitan.__version__}); use pipewright's export for your version"
            )


def pipewright_plan() -> Trainer.Config:
    return apply_plan(llama3_8b())
