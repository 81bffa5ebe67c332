# pipewright 0.1.0: llama3-8b on dgx-h100, 16 GPUs, interleaved schedule; predicted 12.500 s per step, 71.2 GB peak memory.
# Megatron-LM arguments (megatron/training/arguments.py at d98e8a6): the model, its parallel layout, batch,
# precision and recomputation as simulated. Add the data, the tokenizer (its vocabulary is 128,256; Megatron-LM
# pads it to a multiple of 128 x tp) and the optimizer's schedule, and run them as
#   source megatron_args.sh && torchrun ... pretrain_gpt.py "${PIPEWRIGHT_MEGATRON_ARGS[@]}" <data, tokenizer, learning-rate arguments>
PIPEWRIGHT_MEGATRON_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 4
  --sequence-parallel
  --num-layers 32
  --bf16
  --hidden-size 4096
  --num-attention-heads 32
  --ffn-hidden-size 14336
  --group-query-attention
  --num-query-groups 8
  --max-position-embeddings 8192
  --position-embedding-type rope
  --normalization RMSNorm
  --swiglu
  --untie-embeddings-and-output-weights
  --disable-bias-linear
  --attention-dropout 0
  --hidden-dropout 0
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
