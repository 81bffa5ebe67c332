# pipewright 0.1.0: llama3-8b on dgx-h100, 32 GPUs (tp 2, pp 4, dp 4); predicted 12.500 s per step, 71.2 GB peak memory.
#
# The plan's stages for DeepSpeed's PipelineModule (deepspeed/runtime/pipe/module.py), which decides the
# split (ds_config.json cannot: DeepSpeed reads no stage count or partition from it). Build the module with
#   from pipewright_partition import pipeline_module
#   model = pipeline_module(layers, loss_fn=...)
# where `layers` is pipewright's layer list, one entry per layer:
#      0: embedding
#      1..32: block0 .. block31
#     33: head
# If your list has extra entries (a lambda, a separate final norm), shift the bounds in PARTS after them.
# Tensor parallelism (tp 2) comes from your model code's mpu (e.g. Megatron-DeepSpeed's
# --tensor-model-parallel-size 2) and the topology below.
from deepspeed.pipe import PipelineModule
from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology

# Stage s builds layers PARTS[s] .. PARTS[s + 1] - 1. No partition_method takes bounds: this subclass sets
# them where PipelineModule computes its own (_partition_layers).
PARTS = [0, 7, 16, 25, 34]


class PipewrightPipelineModule(PipelineModule):
    def _partition_layers(self, method="pipewright"):
        num_stages = self._topo.get_dim("pipe")
        if len(PARTS) != num_stages + 1 or PARTS[-1] != len(self._layer_specs):
            raise RuntimeError(
                f"pipewright partition: {len(PARTS) - 1} stages over {PARTS[-1]} layers, but the module has "
                f"{num_stages} stages and {len(self._layer_specs)} layers"
            )
        self.parts = list(PARTS)
        stage_id = self._topo.get_coord(self.global_rank).pipe
        self._set_bounds(start=self.parts[stage_id], stop=self.parts[stage_id + 1])


def pipeline_module(layers, **kwargs):
    return PipewrightPipelineModule(layers=layers, topology=PipeModelDataParallelTopology(num_pp=4, num_mp=2, num_dp=4), activation_checkpoint_interval=1, **kwargs)
