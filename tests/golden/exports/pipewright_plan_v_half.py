# pipewright 0.1.0: llama3-8b on dgx-h100, 2 GPUs (tp 1, cp 1, pp 2, dp 1), v-half schedule; predicted 12.500 s per step, 71.2 GB peak memory.
# torchtitan main (b5bcd76c, Aug 2026): a run is a function returning Trainer.Config. Run this plan with
#   PYTHONPATH=<this folder> torchrun --nproc_per_node=<GPUs per node> ... -m torchtitan.train \
#       --module pipewright_plan --config pipewright_plan
# on 2 GPUs in all. module_fqns_per_model_part below assumes 32 transformer layers (layers.0 ..
# layers.31); torchtitan drops any module a stage does not list without a word.
from torchtitan.distributed.activation_checkpoint import FullAC
from torchtitan.trainer import Trainer
from torchtitan.models.llama3.config_registry import llama3_8b


def apply_plan(config: Trainer.Config) -> Trainer.Config:
    p = config.parallelism
    p.data_parallel_replicate_degree = 1
    p.data_parallel_shard_degree = 1
    p.tensor_parallel_degree = 1
    p.enable_sequence_parallel = False
    p.context_parallel_degree = 1
    p.expert_parallel_degree = 1
    p.pipeline_parallel_degree = 2
    p.pipeline_parallel_schedule = "ZBVZeroBubble"
    p.pipeline_parallel_schedule_csv = "exports/pipewright_schedule.csv"
    p.num_pp_microbatches = 4
    p.module_fqns_per_model_part = [
        ["tok_embeddings", "layers.0", "layers.1", "layers.2", "layers.3", "layers.4", "layers.5", "layers.6", "layers.7"],
        ["layers.8", "layers.9", "layers.10", "layers.11", "layers.12", "layers.13", "layers.14", "layers.15"],
        ["layers.16", "layers.17", "layers.18", "layers.19", "layers.20", "layers.21", "layers.22", "layers.23"],
        ["layers.24", "layers.25", "layers.26", "layers.27", "layers.28", "layers.29", "layers.30", "layers.31", "norm", "lm_head"],
    ]
    config.training.num_tokens_per_microbatch_per_dp_rank = 8192
    config.training.num_tokens_per_train_step = 32768
    config.training.max_context_length = 8192
    config.training.disable_cuda_graphs = True
    config.activation_checkpoint = None
    return config


def pipewright_plan() -> Trainer.Config:
    return apply_plan(llama3_8b())
