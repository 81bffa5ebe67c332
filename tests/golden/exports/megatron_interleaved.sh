# pipewright 0.1.0: llama3-8b on dgx-h100, 16 GPUs, interleaved schedule; predicted 12.500 s per step, 71.2 GB peak memory.
# Megatron-LM arguments (megatron/training/arguments.py). Use them as
#   source megatron_args.sh && torchrun ... pretrain_gpt.py "${PIPEWRIGHT_MEGATRON_ARGS[@]}" <model, data, optimizer arguments>
PIPEWRIGHT_MEGATRON_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 4
  --sequence-parallel
  --num-layers 32
  --seq-length 8192
  --micro-batch-size 1
  --global-batch-size 64
  --pipeline-model-parallel-layout 'Ettt|t*4|t*4|t*5|(t*4|)*3,t*4L'
  --recompute-granularity selective
  --use-distributed-optimizer
  --overlap-grad-reduce
  --overlap-param-gather
  --attention-backend flash
  --use-tp-pp-dp-mapping
)
