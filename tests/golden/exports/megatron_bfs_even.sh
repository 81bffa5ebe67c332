# pipewright 0.1.0: llama3-8b on dgx-h100, 32 GPUs, bfs schedule; predicted 12.500 s per step, 71.2 GB peak memory.
# Megatron-LM arguments (megatron/training/arguments.py). Use them as
#   source megatron_args.sh && torchrun ... pretrain_gpt.py "${PIPEWRIGHT_MEGATRON_ARGS[@]}" <model, data, optimizer arguments>
PIPEWRIGHT_MEGATRON_ARGS=(
  --tensor-model-parallel-size 8
  --pipeline-model-parallel-size 4
  --sequence-parallel
  --num-layers 32
  --seq-length 8192
  --micro-batch-size 2
  --global-batch-size 32
  --num-virtual-stages-per-pipeline-rank 2
  --microbatch-group-size-per-virtual-pipeline-stage 16
  --recompute-granularity full
  --recompute-method uniform
  --recompute-num-layers 1
  --attention-backend flash
)
