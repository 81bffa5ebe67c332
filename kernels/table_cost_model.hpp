#pragma once
// A cost model priced from measured kernel tables where they answer (docs/kernel-tables.md): each layer
// phase's dense GEMMs (PhaseWork::gemms), its fused attention forward (PhaseWork::attentions) and its tp
// collectives within a node (PhaseWork::collectives) timed shape by shape from the tables, on the GPUs the
// tables were measured on; everything else (memory-bound work, the attention backward, MLA's and context
// parallelism's attention, collectives across nodes, the routed experts' grouped GEMMs, a part with a shape the
// tables cannot answer, another GPU) from the model below, which must price a phase as the sum of its parts,
// as the analytic model does: the tables' times replace exactly what it charges for the same work. It counts
// what it priced, so that every report can say how much came from tables and how much from the model.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/cost_model.hpp"
#include "kernels/attention_backends.hpp"
#include "kernels/kernel_queries.hpp"

namespace pw {

// Whether a GPU (its cluster name, "H200 SXM 141GB") is the one an AIConfigurator system names
// ("h200_sxm"): the same chip, and the same form factor when both say it (sxm, pcie).
bool gpu_matches_system(const std::string& gpu_name, const std::string& system);
// Whether `tables` were measured on `gpu`: its system's name, and its memory bandwidth within 10% where the
// tables record theirs.
bool measured_on(const GpuSpec& gpu, const KernelTables& tables);

class TableCostModel : public CostModelOver {
 public:
  TableCostModel(const CostModel& below, std::shared_ptr<KernelTables> tables);

  std::string name() const override;
  double phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& tp_link,
                    int tp) const override;
  // A serving step's layer: its dense GEMMs at the step's tokens, its routed experts at the tokens reaching them, a
  // decode-only step's attention and the tp all-reduces from the tables; a prefill's attention and the rest from
  // the model below.
  double serving_time(const Layer& layer, const ServingWork& work, const GpuSpec& gpu, const LinkSpec& tp_link,
                      int tp) const override;
  // Measured kernels can run faster at a larger shape (another algorithm, a better tile).
  bool serving_time_monotone() const override { return false; }
  // The expert all-to-alls DeepEP carries (RoutedDispatch::deepep: training's flex dispatcher and a serving
  // prefill on its normal kernels, with Megatron-Core's kDeepEpSms SMs; SGLang's decode steps on its
  // low-latency ones) from the tables on their GPU, where they hold the layer's hidden size, top k and experts
  // at the ep group's nodes (whole nodes of 8 GPUs): each dispatch and combine at the tokens the rank sends.
  // Anything else (another dispatcher, a shape or node count not measured, another GPU) from the model below.
  double expert_comm_time(const LayerWork& work, Phase phase, const AllToAllLinks& links) const override;
  // The SMs Megatron-Core gives DeepEP's kernels (moe_deepep_num_sms, 20; DeepEP's own Buffer.num_sms too).
  static constexpr int kDeepEpSms = 20;

  // Distinct shapes asked of the tables, by how they were read.
  struct ShapeCounts {
    long measured = 0, interpolated = 0, extrapolated = 0, missing = 0;
    long asked() const { return measured + interpolated + extrapolated + missing; }
  };
  // What priced the layers' phases so far: seconds from the tables by kind, seconds of the whole phases (of
  // which other_gpu_s on GPUs the tables were not measured on), the shapes asked, and the distinct shapes the
  // tables lacked, with why (the first kMaxMissing): a part with one of them is the model's, whole.
  struct Share {
    double gemm_s = 0, attention_s = 0, collective_s = 0, all_to_all_s = 0;
    double phase_s = 0, other_gpu_s = 0;
    ShapeCounts gemms, attentions, collectives, all_to_alls;
    std::vector<std::string> missing;
    // Kinds a priced run needed that the folder has none of (gemm_perf, context_attention_perf, nccl_perf,
    // generation_attention_perf, moe_perf, wideep_deepep_normal_perf, wideep_deepep_ll_perf): that work wholly the
    // model's, its shapes not asked.
    std::vector<std::string> absent;
    double table_s() const { return gemm_s + attention_s + collective_s + all_to_all_s; }
  };
  Share share() const;
  const KernelTables& tables() const { return queries_.tables(); }
  // Prices attention from `backend`'s kernels alone (--attention-backend), before any question is asked. BadInput
  // when the tables time none of them, naming the kernels they do time.
  void only_attention_kernels(const AttentionBackend& backend);
  // The kernel_source values the attention tables hold (none: the folder times no attention).
  std::vector<std::string> attention_kernels() const { return queries_.attention_kernels(); }
  // The backend set by only_attention_kernels; empty: the fastest kernel the tables measured at each shape.
  const std::string& attention_backend() const { return attention_backend_; }
  static constexpr size_t kMaxMissing = 100;

 private:
  // The most shapes of one kind one part of a phase may have for the tables to price it (a block has 4 to 8
  // GEMMs, an MoE block's shared experts and router a few more, an MTP module's projection and head 3 more; one
  // attention; up to 4 tp collectives).
  static constexpr size_t kMaxPartShapes = 16;
  using GemmKey = std::tuple<bool, double, double, double>;
  using AttentionKey = std::tuple<int, int, int, int, int>;
  using CollectiveKey = std::tuple<int, double, int>;  // kind (kCustomAllReduce: an engine's own), bytes, GPUs
  static constexpr int kCustomAllReduce = -1;
  using DecodeKey = std::tuple<bool, int, int, int, int, int>;  // fp8 KV cache, batch, context, heads, kv heads, dim
  // fp8, tokens, hidden, expert inter, top k, experts, moe tp, moe ep
  using MoeKey = std::tuple<bool, double, int, int, int, int, int, int>;
  // low latency, dispatch (or combine), nodes, hidden, top k, experts, tokens
  using AllToAllKey = std::tuple<bool, bool, int, int, int, int, double>;
  // A serving layer's dense GEMMs at one token (m 1, bf16), by model, layer and tp.
  struct ServingGemms {
    std::string model;  // the name, against an address reused by another model
    std::vector<GemmShape> per_token;
  };
  const std::vector<GemmShape>& serving_gemms(const Layer& layer, const ServingWork& work) const;
  const TableTime& look_up_locked(const Layer& layer, const GemmShape& g) const;
  // `cache`'s answer for `key`, looked up once (under the lock): `look_up()` asks the tables, and a missing
  // answer is noted the first time, as `describe()` names it, in `layer`.
  template <class Cache, class Key, class LookUp, class Describe>
  const TableTime& answer_once(Cache& cache, const Key& key, const Layer& layer, LookUp&& look_up,
                               Describe&& describe) const {
    auto it = cache.find(key);
    if (it == cache.end()) {
      it = cache.emplace(key, look_up()).first;
      if (!it->second.found()) note_missing(describe(), layer, it->second);
    }
    return it->second;
  }
  struct Answers;
  // Every answer a phase's parts need; cached ones under the shared lock, the rest looked up under the lock.
  // Whether `gpu` is the tables' (the answers then filled).
  bool answer(const Layer& layer, const PhaseWork* const parts[2], const GpuSpec& gpu, int tp, bool collectives,
              Answers& a) const;
  bool answer_cached(const PhaseWork* const parts[2], int tp, bool collectives, Answers& a) const;
  void answer_all(const Layer& layer, const PhaseWork* const parts[2], int tp, bool collectives, Answers& a) const;
  void note_missing(const std::string& what, const Layer& layer, const TableTime& t) const;

  // The kinds the tables can be asked, by bit (kKinds' order), and those a run needed that the folder lacks.
  static constexpr const char* kKinds[] = {"gemm_perf", "context_attention_perf", "nccl_perf",
                                           "generation_attention_perf", "moe_perf", "wideep_deepep_normal_perf",
                                           "wideep_deepep_ll_perf"};
  enum KindBit { kGemm = 1, kContext = 2, kNccl = 4, kGeneration = 8, kMoe = 16, kDeepEp = 32, kDeepEpLowLatency = 64 };
  bool has(KindBit kind) const { return (present_ & kind) != 0; }
  void need(KindBit kind) const {
    if (!has(kind)) absent_.fetch_or(kind, std::memory_order_relaxed);
  }
  bool asks(const FusedAttention& a) const;
  bool on_gpu_locked(const GpuSpec& gpu) const;  // whether the tables are `gpu`'s, remembered (under the lock)

  int present_ = 0;
  mutable std::atomic<int> absent_{0};
  std::string system_;
  // Lookups are shared (the plan search prices from several threads); building a grid or caching an answer
  // takes the lock alone. Answers stay where a cache put them (a map's elements do not move).
  mutable std::shared_mutex mutex_;
  mutable KernelQueries queries_;
  std::string attention_backend_;
  mutable std::map<GemmKey, TableTime> gemms_;
  mutable std::map<AttentionKey, TableTime> attentions_;
  mutable std::map<CollectiveKey, TableTime> collectives_;
  mutable std::map<DecodeKey, TableTime> decodes_;
  mutable std::map<MoeKey, TableTime> moes_;
  mutable std::map<AllToAllKey, TableTime> all_to_alls_;
  mutable std::map<std::tuple<const Model*, int, int, int>, ServingGemms> serving_gemms_;
  mutable std::map<std::string, bool> gpus_;  // GPU name: whether it is the tables' own
  // Seconds summed as whole picoseconds: an integer add is one instruction where a double's is a compare-and-swap
  // loop, and the search's threads add on every phase (2^63 ps is 107 days of priced time).
  static constexpr double kTicksPerSecond = 1e12;
  static void add(std::atomic<long long>& sum, double s) {
    if (s != 0) sum.fetch_add(static_cast<long long>(s * kTicksPerSecond + 0.5), std::memory_order_relaxed);
  }
  static double seconds(const std::atomic<long long>& sum) { return static_cast<double>(sum.load()) / kTicksPerSecond; }
  mutable std::atomic<long long> gemm_s_{0}, attention_s_{0}, collective_s_{0}, all_to_all_s_{0}, phase_s_{0},
      other_gpu_s_{0};
  mutable std::mutex missing_mutex_;
  mutable std::vector<std::string> missing_;
};

}  // namespace pw
