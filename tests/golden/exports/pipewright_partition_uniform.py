# pipewright 0.1.0: llama3-8b on dgx-h100, 8 GPUs (tp 1, pp 4, dp 2); predicted 12.500 s per step, 71.2 GB peak memory.
#
# The plan's stages for DeepSpeed's PipelineModule (deepspeed/runtime/pipe/module.py), which decides the
# split (ds_config.json cannot: DeepSpeed reads no stage count or partition from it). Build the module with
#   from pipewright_partition import pipeline_module
#   model = pipeline_module(layers, loss_fn=...)
# where `layers` is pipewright's layer list, one entry per layer:
#      0: embedding
#      1..32: block0 .. block31
#     33: head
# If your list has extra entries (a lambda, a separate final norm), partition_method="uniform"
# counts them and splits another list: give it pipewright's.
from deepspeed.pipe import PipelineModule


def pipeline_module(layers, **kwargs):
    return PipelineModule(layers=layers, num_stages=4, partition_method="uniform", activation_checkpoint_interval=0, **kwargs)
