#pragma once
// The questions a cost model asks of measured tables, in pipewright's terms (seconds, bytes, a precision),
// translated to the tables' kinds and columns (docs/kernel-tables.md lists them):
// - a GEMM of m x k by k x n: gemm_perf, by gemm_dtype, over m, n and k;
// - a collective of `bytes` a GPU over `gpus` GPUs: nccl_perf, by op_name and nccl_dtype, over num_gpus and
//   message_size (elements);
// - a prefill attention: context_attention_perf, by dtypes, head_dim, the GQA group (num_heads /
//   num_key_value_heads), no window and beam 1, over batch_size, isl and num_heads.
// - a decode step's attention: generation_attention_perf, by the KV cache's dtype, head_dim, the GQA group, no
//   window, beam 1 and isl 1, over batch_size, step (the tokens in cache past isl) and num_heads;
// - an engine's custom all-reduce: custom_allreduce_perf, bfloat16, over num_gpus and message_size (elements);
// - a mixture of experts' routed experts on one GPU (their fused kernel: the gate and up GEMMs, the activation and
//   the down GEMM of the tokens routed there): moe_perf, by moe_dtype, balanced routing, hidden_size, inter_size,
//   topk, num_experts, moe_tp_size and moe_ep_size, over num_tokens (the tokens entering the layer on the GPUs the
//   experts spread over, AIConfigurator's tokens times its attention data parallelism).
// Each returns a TableTime: Missing (with the reason) where the tables cannot say, for the analytic model.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/workload.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/table_grid.hpp"

namespace pw {

enum class TableCollective { AllReduce, AllGather, ReduceScatter, AllToAll };

class KernelQueries {
 public:
  explicit KernelQueries(std::shared_ptr<KernelTables> tables) : tables_(std::move(tables)) {}
  const KernelTables& tables() const { return *tables_; }

  // A GEMM's time: the fastest kernel the framework measured at that shape.
  TableTime gemm(Precision precision, double m, double n, double k);
  TableTime collective(TableCollective op, Precision precision, double bytes, int gpus);
  TableTime context_attention(Precision precision, int batch, int seq, int heads, int kv_heads, int head_dim);
  // One decode step's attention: `batch` sequences of `context` tokens in cache each, the KV cache in fp8 or not.
  TableTime generation_attention(bool fp8_kv_cache, int batch, int context, int heads, int kv_heads, int head_dim);
  // Prices attention (prefill and decode) from these kernel_source values alone (an engine's attention backend,
  // kernels/attention_backends.hpp), the fastest of them at each shape; empty: every kernel the tables measured.
  void only_attention_kernels(std::vector<std::string> sources) { attention_sources_ = std::move(sources); }
  // The kernel_source values the attention tables hold (both kinds, sorted, each once).
  std::vector<std::string> attention_kernels() const;
  // An engine's own all-reduce (vLLM's custom all-reduce, TensorRT-LLM's): the fastest kernel measured.
  TableTime custom_all_reduce(double bytes, int gpus);
  // The routed experts of an MoE layer on one GPU (above), in fp8 (per-tensor) or bfloat16: the fastest kernel
  // measured.
  TableTime moe(bool fp8, double tokens, int hidden, int inter, int topk, int experts, int moe_tp, int moe_ep);
  // DeepEP's normal (high-throughput) kernels, as SGLang's tables time them: the dispatch (or the combine) of
  // `tokens` a rank sends, each to `topk` of `experts` experts spread over `nodes` nodes of 8 GPUs, with
  // `sms` SMs for the kernels: the transmit plus the notify time, as AIConfigurator sums them.
  TableTime deepep_normal(bool dispatch, int nodes, int hidden, int topk, int experts, int sms, double tokens);
  // DeepEP's low-latency kernels (a decode step's, no SMs to choose): their measured average time.
  TableTime deepep_low_latency(bool dispatch, int nodes, int hidden, int topk, int experts, double tokens);

 private:
  // The fastest of `kind`'s kernels (its kernel_source values, each a grid of its own shapes) at `at`.
  // `only` non-empty: those kernels alone (missing when the table holds none of them).
  TableTime fastest_kernel(const KernelTable& table, const std::string& kind, TableGrid::Select select,
                           const std::vector<std::string>& axes, const std::vector<double>& at, bool slice,
                           const std::vector<std::string>& only = {});
  // An attention kind's time at `at`: from every kernel's rows together, or, with only_attention_kernels, the
  // fastest of those kernels (each a grid of its own); missing when the table holds none of them.
  TableTime attention_at(const std::string& kind, const TableGrid::Select& select, const std::vector<std::string>& axes,
                         const std::vector<double>& at);
  // The grid of `kind` for one selection, built on first use.
  const TableGrid* grid(const std::string& kind, const TableGrid::Select& select, const std::vector<std::string>& axes,
                        const std::string& time = "time_s");

  std::shared_ptr<KernelTables> tables_;
  std::map<std::string, std::unique_ptr<TableGrid>> grids_;
  std::vector<std::string> attention_sources_;
};

// The tables' names: "bfloat16" and "fp8" for GEMMs, "half" and "int8" for NCCL's element types.
const char* gemm_dtype(Precision p);
const char* nccl_dtype(Precision p);
const char* to_string(TableCollective op);  // the tables' op_name: all_reduce, all_gather, reduce_scatter, alltoall

}  // namespace pw
