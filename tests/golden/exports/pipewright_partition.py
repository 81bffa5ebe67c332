# pipewright 0.1.0: llama3-8b on dgx-h100, 32 GPUs (tp 2, pp 4, dp 4); predicted 12.500 s per step, 71.2 GB peak memory.
#
# DeepSpeed's PipelineModule takes partition_method 'uniform', 'parameters' or 'type:<regex>'; none of
# them takes per-stage bounds. This subclass sets the plan's bounds where PipelineModule computes its
# own (_partition_layers in deepspeed/runtime/pipe/module.py): stage s builds layers
# PARTS[s] .. PARTS[s + 1] - 1 of the `layers` list. The list must be pipewright's, one entry per layer:
#      0: embedding
#      1..32: block0 .. block31
#     33: head
# If your list has extra entries (a lambda, a separate final norm), shift the bounds after them.
# Tensor parallelism (tp 2) comes from your model code's mpu (e.g. Megatron-DeepSpeed's
# --tensor-model-parallel-size 2) and the topology below.
#   from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology
#
#   from pipewright_partition import PipewrightPipelineModule
#   model = PipewrightPipelineModule(layers=layers, topology=PipeModelDataParallelTopology(num_pp=4, num_mp=2, num_dp=4), activation_checkpoint_interval=1, ...)
from deepspeed.pipe import PipelineModule

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
