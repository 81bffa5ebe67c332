#pragma once
// What one pipeline step processes and how it is parallelised.
namespace pw {

enum class Recompute { None, Selective, Full };

const char* to_string(Recompute r);
Recompute recompute_from_string(const char* text);  // "none", "selective", "full"; BadInput otherwise

struct Workload {
  int micro_batch_size = 1;  // b
  int seq_len = 0;           // s
  int tp = 1;                // t
  bool sequence_parallel = true;  // only meaningful when tp > 1
  Recompute recompute = Recompute::None;
  // Fused attention (FlashAttention): the s x s scores never reach memory; its backward recomputes
  // them. Off by default so that the numbers match Korthikanti et al.'s accounting.
  bool flash_attention = false;
};

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int vpp = 1;           // model chunks per pipeline rank
  int microbatches = 1;  // m per pipeline per iteration
  bool distributed_optimizer = true;  // ZeRO-1 over dp
  int gpus() const { return tp * pp * dp; }
};

}  // namespace pw
