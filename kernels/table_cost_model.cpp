#include "kernels/table_cost_model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/serving_work.hpp"
#include "core/units.hpp"

namespace pw {
namespace {

// Letters and digits, lower case: "H200 SXM 141GB" -> "h200sxm141gb".
std::string alnum(const std::string& s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool mentions(const std::string& text, const std::string& word) { return text.find(word) != std::string::npos; }

}  // namespace

bool gpu_matches_system(const std::string& gpu_name, const std::string& system) {
  const auto underscore = system.find('_');
  const std::string chip = alnum(system.substr(0, underscore));
  const std::string form = underscore == std::string::npos ? "" : alnum(system.substr(underscore + 1));
  if (chip.empty()) return false;
  // A GPU named with its system in brackets ("B200 (GB200) 186GB": a GB200's B200, run at its own power) is
  // that system's only.
  const auto open = gpu_name.find('('), close = gpu_name.find(')', open == std::string::npos ? 0 : open);
  if (open != std::string::npos && close != std::string::npos)
    return alnum(gpu_name.substr(open + 1, close - open - 1)) == chip;
  const std::string gpu = alnum(gpu_name);
  if (gpu.rfind(chip, 0) != 0) return false;
  for (const char* f : {"sxm", "pcie"})
    if (mentions(gpu, f) && !form.empty() && form != f) return false;
  return true;
}

bool measured_on(const GpuSpec& gpu, const KernelTables& tables) {
  if (!gpu_matches_system(gpu.name, tables.system())) return false;
  const double bw = tables.hbm_bytes_per_s();
  return bw <= 0 || std::fabs(gpu.hbm_bytes_per_s / bw - 1) <= 0.1;
}

TableCostModel::TableCostModel(const CostModel& below, std::shared_ptr<KernelTables> tables)
    : CostModelOver(below), system_(tables->system()), queries_(std::move(tables)) {
  for (size_t i = 0; i < std::size(kKinds); ++i)
    if (queries_.tables().has(kKinds[i])) present_ |= 1 << i;
}

std::string TableCostModel::name() const {
  return fmt::format("kernel tables ({} {}{}) over {}", system_, queries_.tables().software(),
                     attention_backend_.empty() ? "" : ", attention " + attention_backend_, below_.name());
}

void TableCostModel::only_attention_kernels(const AttentionBackend& backend) {
  const std::vector<std::string> held = queries_.attention_kernels();
  bool any = false;
  for (const std::string& s : backend.kernel_sources) any = any || std::find(held.begin(), held.end(), s) != held.end();
  if (!any)
    throw_bad_input("--attention-backend {}: {} {}'s tables time no {} attention ({}); use one they time or other tables",
                    backend.name, system_, queries_.tables().software(), backend.name,
                    held.empty() ? std::string("they name no attention kernels")
                                 : fmt::format("their attention kernels: {}", fmt::join(held, ", ")));
  queries_.only_attention_kernels(backend.kernel_sources);
  attention_backend_ = backend.name;
}

namespace {

// The attention kernels the tables measure: a causal forward over the whole sequence (context_attention_perf,
// prefill), with keys and values as wide as the queries. The backward, MLA's, a window's and context
// parallelism's ring stay the model's.
bool asks_tables(const FusedAttention& a) { return !a.backward && !a.mla && a.cp == 1 && a.keys == a.seq; }

TableCollective table_op(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return TableCollective::AllReduce;
    case CollectiveKind::AllGather: return TableCollective::AllGather;
    case CollectiveKind::ReduceScatter: return TableCollective::ReduceScatter;
  }
  return TableCollective::AllReduce;
}

}  // namespace

bool TableCostModel::on_gpu_locked(const GpuSpec& gpu) const {
  auto it = gpus_.find(gpu.name);
  if (it == gpus_.end()) it = gpus_.emplace(gpu.name, measured_on(gpu, queries_.tables())).first;
  return it->second;
}

bool TableCostModel::asks(const FusedAttention& a) const { return has(kContext) && asks_tables(a); }

// One answer for each shape of each part, in the parts' order: a part's GEMMs, its asked attentions, its
// collectives. Left unset (a phase fills it on every call): only the answers of the shapes asked are read.
struct TableCostModel::Answers {
  const TableTime* gemms[2][kMaxPartShapes];
  const TableTime* attentions[2][kMaxPartShapes];
  const TableTime* collectives[2][kMaxPartShapes];
};

bool TableCostModel::answer_cached(const PhaseWork* const parts[2], int tp, bool collectives, Answers& a) const {
  const auto found = [](const auto& cache, const auto& key, const TableTime*& out) {
    const auto it = cache.find(key);
    out = it == cache.end() ? nullptr : &it->second;
    return out != nullptr;
  };
  for (int i = 0; i < 2; ++i) {
    if (!parts[i]) continue;
    const PhaseWork& p = *parts[i];
    for (size_t j = 0; has(kGemm) && j < p.gemms.size() && j < kMaxPartShapes; ++j) {
      const GemmShape& g = p.gemms[j];
      if (!found(gemms_, GemmKey{g.fp8, g.m, g.n, g.k}, a.gemms[i][j])) return false;
    }
    for (size_t j = 0; j < p.attentions.size() && j < kMaxPartShapes; ++j) {
      const FusedAttention& t = p.attentions[j];
      if (asks(t) &&
          !found(attentions_, AttentionKey{t.batch, t.seq, t.heads, t.kv_heads, t.head_dim}, a.attentions[i][j]))
        return false;
    }
    for (size_t j = 0; collectives && j < p.collectives.size() && j < kMaxPartShapes; ++j) {
      const Collective& c = p.collectives[j];
      if (!found(collectives_, CollectiveKey{static_cast<int>(c.kind), c.bytes, tp}, a.collectives[i][j])) return false;
    }
  }
  return true;
}

void TableCostModel::answer_all(const Layer& layer, const PhaseWork* const parts[2], int tp, bool collectives,
                                Answers& a) const {
  for (int i = 0; i < 2; ++i) {
    if (!parts[i]) continue;
    const PhaseWork& p = *parts[i];
    for (size_t j = 0; has(kGemm) && j < p.gemms.size() && j < kMaxPartShapes; ++j) {
      a.gemms[i][j] = &look_up_locked(layer, p.gemms[j]);
    }
    for (size_t j = 0; j < p.attentions.size() && j < kMaxPartShapes; ++j) {
      const FusedAttention& t = p.attentions[j];
      if (!asks(t)) continue;
      a.attentions[i][j] = &answer_once(
          attentions_, AttentionKey{t.batch, t.seq, t.heads, t.kv_heads, t.head_dim},
          layer,
          [&] { return queries_.context_attention(Precision::Bf16, t.batch, t.seq, t.heads, t.kv_heads, t.head_dim); },
          [&] {
            return fmt::format("attention forward batch {}, sequence {}, heads {}, kv heads {}, head dim {}", t.batch,
                               t.seq, t.heads, t.kv_heads, t.head_dim);
          });
    }
    for (size_t j = 0; collectives && j < p.collectives.size() && j < kMaxPartShapes; ++j) {
      const Collective& c = p.collectives[j];
      a.collectives[i][j] = &answer_once(
          collectives_, CollectiveKey{static_cast<int>(c.kind), c.bytes, tp}, layer,
          [&] { return queries_.collective(table_op(c.kind), Precision::Bf16, c.bytes, tp); },
          [&] { return fmt::format("{} of {} over {} GPUs", collective_name(c.kind), format_bytes(c.bytes), tp); });
    }
  }
}

bool TableCostModel::answer(const Layer& layer, const PhaseWork* const parts[2], const GpuSpec& gpu, int tp,
                            bool collectives, Answers& a) const {
  {
    std::shared_lock read(mutex_);
    const auto gpu_it = gpus_.find(gpu.name);
    if (gpu_it != gpus_.end() && (!gpu_it->second || answer_cached(parts, tp, collectives, a))) return gpu_it->second;
  }
  std::unique_lock write(mutex_);
  const bool on_gpu = on_gpu_locked(gpu);
  if (on_gpu) answer_all(layer, parts, tp, collectives, a);
  return on_gpu;
}

void TableCostModel::note_missing(const std::string& what, const Layer& layer, const TableTime& t) const {
  std::lock_guard lock(missing_mutex_);
  if (missing_.size() < kMaxMissing) missing_.push_back(fmt::format("{} in {}: {}", what, layer.name, t.note));
}

double TableCostModel::phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                                  const LinkSpec& tp_link, int tp) const {
  const double model_s = below_.phase_time(layer, work, phase, gpu, tp_link, tp);
  if (work.forward_s || work.backward_input_s || work.backward_weight_s || layer.explicit_costs) return model_s;
  const PhaseWork* parts[2] = {nullptr, nullptr};
  switch (phase) {
    case Phase::Forward: parts[0] = &work.forward; break;
    case Phase::BackwardInput: parts[0] = &work.recompute, parts[1] = &work.backward_input; break;
    case Phase::BackwardWeight: parts[0] = &work.backward_weight; break;
  }
  const auto empty = [](const PhaseWork* p) {
    return !p || (p->gemms.empty() && p->attentions.empty() && p->collectives.empty());
  };
  if (empty(parts[0]) && empty(parts[1])) return model_s;
  // The tables' collectives are NCCL's within one node. A kind the folder lacks is the model's, and noted.
  const bool tp_in_node = tp > 1 && !tp_link.inter_node;
  const bool collectives = tp_in_node && has(kNccl);
  for (const PhaseWork* p : parts) {
    if (!p) continue;
    if (!p->gemms.empty()) need(kGemm);
    if (std::any_of(p->attentions.begin(), p->attentions.end(), asks_tables)) need(kContext);
    if (tp_in_node && !p->collectives.empty()) need(kNccl);
  }
  Answers a;
  if (!answer(layer, parts, gpu, tp, collectives, a)) {
    add(other_gpu_s_, model_s);
    add(phase_s_, model_s);
    return model_s;
  }
  // What the tables price, as work of its own: what the model below charges for it (FLOPs at its rates and a
  // launch a kernel; its collectives' exposed time) is taken off its time for the phase, and the tables' times
  // put on. Of a part's GEMMs, attentions or collectives, one shape the tables cannot answer (or more shapes
  // than kMaxPartShapes) keeps that kind's price the model's.
  // The collectives priced go in a scratch work of this thread's, its vector's storage kept between calls.
  thread_local LayerWork comm_only;
  LayerWork compute_only;
  const auto of_phase = [phase](LayerWork& w) -> PhaseWork& {
    return phase == Phase::Forward ? w.forward : phase == Phase::BackwardInput ? w.backward_input : w.backward_weight;
  };
  for (PhaseWork* p : {&comm_only.forward, &comm_only.backward_input, &comm_only.backward_weight}) p->collectives.clear();
  PhaseWork& compute = of_phase(compute_only);
  PhaseWork& comm = of_phase(comm_only);
  double gemm_s = 0, attention_s = 0, comm_table_s = 0, comm_model_s = 0;
  for (int i = 0; i < 2; ++i) {
    const PhaseWork* p = parts[i];
    if (!p) continue;
    if (has(kGemm) && !p->gemms.empty() && p->gemms.size() <= kMaxPartShapes &&
        std::all_of(a.gemms[i], a.gemms[i] + p->gemms.size(), [](const TableTime* t) { return t->found(); })) {
      for (size_t j = 0; j < p->gemms.size(); ++j) {
        const GemmShape& g = p->gemms[j];
        (g.fp8 ? compute.fp8_gemm_flops : compute.gemm_flops) += g.flops();
        gemm_s += a.gemms[i][j]->seconds;
      }
      compute.kernels += static_cast<int>(p->gemms.size());
    }
    if (p->attentions.size() <= kMaxPartShapes) {
      bool all = true;
      double s = 0, flops = 0;
      int kernels = 0;
      for (size_t j = 0; j < p->attentions.size() && all; ++j) {
        if (!asks(p->attentions[j])) continue;
        all = a.attentions[i][j]->found();
        s += a.attentions[i][j]->seconds;
        flops += p->attentions[j].flops;
        ++kernels;
      }
      if (all && kernels > 0) {
        compute.attention_flops += flops;
        compute.kernels += kernels;
        attention_s += s;
      }
    }
    if (collectives && !p->collectives.empty() && p->collectives.size() <= kMaxPartShapes &&
        std::all_of(a.collectives[i], a.collectives[i] + p->collectives.size(),
                    [](const TableTime* t) { return t->found(); })) {
      for (size_t j = 0; j < p->collectives.size(); ++j) {
        const Collective& c = p->collectives[j];
        comm.collectives.push_back(c);
        comm_table_s += a.collectives[i][j]->seconds;
        comm_model_s += below_.collective_time(c.kind, c.bytes, tp, tp_link);
      }
    }
  }
  double s = model_s;
  if (gemm_s + attention_s > 0) s += gemm_s + attention_s - below_.phase_time(layer, compute_only, phase, gpu, tp_link, tp);
  // The model below hides part of the tp collectives behind compute (Megatron's tp-comm-overlap): the tables'
  // collectives are exposed in the same share.
  double collective_s = 0;
  if (comm_model_s > 0) {
    const double exposed_model_s = below_.phase_time(layer, comm_only, phase, gpu, tp_link, tp);
    collective_s = comm_table_s * exposed_model_s / comm_model_s;
    s += collective_s - exposed_model_s;
  }
  add(gemm_s_, gemm_s);
  add(attention_s_, attention_s);
  add(collective_s_, collective_s);
  add(phase_s_, s);
  return s;
}

const std::vector<GemmShape>& TableCostModel::serving_gemms(const Layer& layer, const ServingWork& work) const {
  const auto key = std::make_tuple(work.model, layer.block, static_cast<int>(layer.kind), work.tp);
  auto it = serving_gemms_.find(key);
  if (it != serving_gemms_.end() && it->second.model == work.model->name) return it->second.per_token;
  // The forward GEMMs of one token as training lays them out (tp's split, no sequence parallelism); the routed
  // experts' are not among them.
  ServingGemms g{work.model->name, {}};
  Workload one;
  one.micro_batch_size = 1;
  one.seq_len = 1;
  one.tp = work.tp;
  one.sequence_parallel = false;
  g.per_token = layer_work(*work.model, layer, one).forward.gemms;
  return (serving_gemms_[key] = std::move(g)).per_token;
}

const TableTime& TableCostModel::look_up_locked(const Layer& layer, const GemmShape& g) const {
  return answer_once(
      gemms_, GemmKey{g.fp8, g.m, g.n, g.k}, layer,
      [&] { return queries_.gemm(g.fp8 ? Precision::Fp8 : Precision::Bf16, g.m, g.n, g.k); },
      [&] { return fmt::format("{} GEMM m {:g}, n {:g}, k {:g}", g.fp8 ? "fp8" : "bf16", g.m, g.n, g.k); });
}

namespace {

// The last serving layer this thread priced: a step's blocks are alike (the same shapes and work), so all but
// the first of them are answered here, without the tables' locks and maps.
struct LastServing {
  const void* owner = nullptr;
  const Model* model = nullptr;
  LayerKind kind = LayerKind::Block;
  bool moe = false;
  int window = 0, tp = 0;
  bool inter_node = false;
  std::string gpu;  // its name
  ServingWork work;
  double gemm_s = 0, attention_s = 0, collective_s = 0, s = 0;
};

// The routed experts' kernels a table's fused MoE call times (alignment, two grouped GEMMs, activation, combine):
// serving_layer_kernels' routed ones less the router's GEMM and top-k, which stay the model's.
constexpr double kMoeTableKernels = kServingRoutedKernels - 2;

// The tables time routed experts under balanced routing: T tokens' T k copies on min(E, T k) distinct experts of
// E. A run's router sends each token to k experts as good as at random, reaching fewer while T k is near E or
// below (routed_experts_reached, what the analytic model reads). A small batch's fused kernel is its weight reads,
// one an expert reached: its time scales with them.
double routed_touch_ratio(double tokens, int top_k, int experts) {
  const double balanced = std::min(1.0, tokens * (static_cast<double>(top_k) / experts));
  return balanced > 0 ? routed_experts_reached(tokens, top_k, experts) / balanced : 1.0;
}

bool same_work(const ServingWork& a, const ServingWork& b) {
  if (a.collectives.size() != b.collectives.size()) return false;
  for (size_t i = 0; i < a.collectives.size(); ++i)
    if (a.collectives[i].kind != b.collectives[i].kind || a.collectives[i].bytes != b.collectives[i].bytes) return false;
  return a.weight_bytes == b.weight_bytes && a.gemm_flops == b.gemm_flops && a.fp8_gemm_flops == b.fp8_gemm_flops &&
         a.attention_flops == b.attention_flops && a.kv_bytes == b.kv_bytes &&
         a.attention_sequences == b.attention_sequences && a.elementwise_bytes == b.elementwise_bytes &&
         a.gemm_tokens == b.gemm_tokens && a.weights == b.weights && a.kv_dtype == b.kv_dtype &&
         a.prefill_tokens == b.prefill_tokens && a.decode_tokens == b.decode_tokens &&
         a.decode_context == b.decode_context && a.routed_flops == b.routed_flops &&
         a.routed_weight_bytes == b.routed_weight_bytes && a.routed_tokens == b.routed_tokens && a.ep == b.ep &&
         a.kernels == b.kernels;
}

}  // namespace

double TableCostModel::serving_time(const Layer& layer, const ServingWork& work, const GpuSpec& gpu,
                                    const LinkSpec& tp_link, int tp) const {
  if (!work.model || !work.model->transformer || layer.explicit_costs ||
      (layer.kind != LayerKind::Block && layer.kind != LayerKind::Head))
    return below_.serving_time(layer, work, gpu, tp_link, tp);
  const TransformerConfig& t = *work.model->transformer;
  // A block's dense GEMMs follow from its kind, whether it is MoE and its window (layer_work's dims).
  const bool moe = layer.kind == LayerKind::Block && t.moe_block(layer.block);
  const int window = layer.kind == LayerKind::Block ? t.block_window(layer.block) : 0;
  thread_local LastServing last;
  if (last.owner == this && last.model == work.model && last.kind == layer.kind && last.moe == moe &&
      last.window == window && last.tp == tp && last.inter_node == tp_link.inter_node && last.gpu == gpu.name &&
      same_work(last.work, work)) {
    add(gemm_s_, last.gemm_s);
    add(attention_s_, last.attention_s);
    add(collective_s_, last.collective_s);
    add(phase_s_, last.s);
    return last.s;
  }
  const double model_s = below_.serving_time(layer, work, gpu, tp_link, tp);
  std::unique_lock lock(mutex_);
  const bool on_gpu = on_gpu_locked(gpu);
  if (!on_gpu) {
    lock.unlock();
    add(other_gpu_s_, model_s);
    add(phase_s_, model_s);
    return model_s;
  }
  // What the tables price is taken out of the work the model below prices, and their times added: the dense
  // GEMMs' FLOPs and weights (dense and routed GEMMs are separate kernels, so the routed experts keep the
  // model's max of their FLOP and weight-read times), the decode attention's FLOPs and KV reads, the all-reduces.
  ServingWork rest = work;
  double gemm_s = 0, attention_s = 0, collective_s = 0;
  if (work.gemm_tokens > 0) need(kGemm);
  if (work.gemm_tokens > 0 && has(kGemm)) {
    double s = 0, bf16 = 0, fp8 = 0, weights = 0;
    bool all = true;
    // fp8 per call, not in the cached shapes: the blocks' GEMMs under --quantization fp8 (not the head's).
    const bool in_fp8 = layer.kind == LayerKind::Block && work.weights == ServingWeights::Fp8;
    const std::vector<GemmShape>& gemms = serving_gemms(layer, work);
    for (GemmShape g : gemms) {
      g.fp8 = in_fp8;
      weights += g.k * g.n * serving_weight_bytes(layer.kind, work.weights);
      g.m = work.gemm_tokens;
      const TableTime& time = look_up_locked(layer, g);
      if (!(all = time.found())) break;
      s += time.seconds;
      (g.fp8 ? fp8 : bf16) += g.flops();
    }
    if (all && s > 0) {
      rest.kernels = std::max(0.0, rest.kernels - static_cast<double>(gemms.size()));
      rest.gemm_flops = std::max(0.0, rest.gemm_flops - bf16);
      rest.fp8_gemm_flops = std::max(0.0, rest.fp8_gemm_flops - fp8);
      rest.weight_bytes = std::max(0.0, rest.weight_bytes - weights);
      gemm_s = s;
    }
  }
  // The routed experts: one fused kernel a GPU, read at the tokens that reach its experts. Their FLOPs and the
  // weights the model below reads for them go.
  if (moe && work.routed_tokens > 0) need(kMoe);
  if (moe && work.routed_tokens > 0 && has(kMoe)) {
    const MoeConfig& e = *t.moe;
    const bool fp8 = work.weights == ServingWeights::Fp8;
    const MoeKey key{fp8, work.routed_tokens, t.hidden, e.expert_ffn, e.top_k, e.experts, work.ep > 1 ? 1 : tp, work.ep};
    const TableTime& time = answer_once(
        moes_, key, layer,
        [&] {
          return queries_.moe(fp8, work.routed_tokens, t.hidden, e.expert_ffn, e.top_k, e.experts, std::get<6>(key),
                              work.ep);
        },
        [&] {
          return fmt::format("{}MoE of {:g} tokens, hidden {}, expert inter {}, top {} of {} experts, moe tp {}, ep {}",
                             fp8 ? "fp8 " : "", work.routed_tokens, t.hidden, e.expert_ffn, e.top_k, e.experts,
                             std::get<6>(key), work.ep);
        });
    if (time.found()) {
      double& flops = fp8 ? rest.fp8_gemm_flops : rest.gemm_flops;
      flops = std::max(0.0, flops - work.routed_flops);
      rest.weight_bytes = std::max(0.0, rest.weight_bytes - work.routed_weight_bytes);
      rest.kernels = std::max(0.0, rest.kernels - kMoeTableKernels);
      gemm_s += time.seconds * routed_touch_ratio(work.routed_tokens, e.top_k, e.experts);
    }
  }
  const bool decode_only = layer.kind == LayerKind::Block && work.prefill_tokens == 0 && work.decode_tokens > 0 &&
                           !t.mla && t.block_window(layer.block) == 0;
  if (decode_only) need(kGeneration);
  if (decode_only && has(kGeneration)) {
    const int context = static_cast<int>(std::lround(work.decode_context / static_cast<double>(work.decode_tokens)));
    const DecodeKey key{work.kv_dtype == KvCacheDtype::Fp8, static_cast<int>(work.decode_tokens), context,
                        t.heads / tp, t.kv_heads / tp, t.head_dim};
    const TableTime& decode = answer_once(
        decodes_, key, layer,
        [&] {
          return queries_.generation_attention(std::get<0>(key), std::get<1>(key), context, std::get<3>(key),
                                               std::get<4>(key), t.head_dim);
        },
        [&] {
          return fmt::format("decode attention batch {}, context {}, heads {}, kv heads {}, head dim {}",
                             std::get<1>(key), context, std::get<3>(key), std::get<4>(key), t.head_dim);
        });
    if (decode.found()) {
      rest.attention_flops = 0;
      rest.kv_bytes = 0;
      rest.kernels = std::max(0.0, rest.kernels - 1);
      attention_s = decode.seconds;
    }
  }
  const bool custom_table = queries_.tables().has("custom_allreduce_perf");
  if (tp > 1 && !tp_link.inter_node && !work.collectives.empty() && !custom_table) need(kNccl);
  if (tp > 1 && !tp_link.inter_node && !work.collectives.empty() && (has(kNccl) || custom_table)) {
    double s = 0;
    bool all = true;
    for (const Collective& c : work.collectives) {
      // vLLM's own all-reduce up to its limit, as the model below runs it; NCCL's past it.
      const bool custom =
          c.kind == CollectiveKind::AllReduce && c.bytes <= AnalyticCostModel::kCustomAllReduceMaxBytes && custom_table;
      const CollectiveKey key{custom ? kCustomAllReduce : static_cast<int>(c.kind), c.bytes, tp};
      const TableTime& time = answer_once(
          collectives_, key, layer,
          [&] {
            return custom ? queries_.custom_all_reduce(c.bytes, tp)
                          : queries_.collective(table_op(c.kind), Precision::Bf16, c.bytes, tp);
          },
          [&] {
            return fmt::format("{}{} of {} over {} GPUs", custom ? "custom " : "", collective_name(c.kind),
                               format_bytes(c.bytes), tp);
          });
      if (!(all = time.found())) break;
      s += time.seconds;
    }
    if (all) {
      rest.collectives.clear();
      collective_s = s;
    }
  }
  lock.unlock();
  const double s = gemm_s + attention_s + collective_s > 0
                       ? below_.serving_time(layer, rest, gpu, tp_link, tp) + gemm_s + attention_s + collective_s
                       : model_s;
  last.owner = this;
  last.model = work.model;
  last.kind = layer.kind;
  last.moe = moe;
  last.window = window;
  last.tp = tp;
  last.inter_node = tp_link.inter_node;
  last.gpu = gpu.name;
  last.work = work;
  last.gemm_s = gemm_s;
  last.attention_s = attention_s;
  last.collective_s = collective_s;
  last.s = s;
  add(gemm_s_, gemm_s);
  add(attention_s_, attention_s);
  add(collective_s_, collective_s);
  add(phase_s_, s);
  return s;
}

double TableCostModel::expert_comm_time(const LayerWork& work, Phase phase, const AllToAllLinks& links) const {
  const double model_s = below_.expert_comm_time(work, phase, links);
  if (model_s <= 0) return model_s;
  // The phase's all-to-alls: dispatches and combines in pairs (F: dispatch, combine; B: their gradients, a
  // combine's and a dispatch's, with any recomputation's before them).
  const PhaseWork* parts[2] = {nullptr, nullptr};
  switch (phase) {
    case Phase::Forward: parts[0] = &work.forward; break;
    case Phase::BackwardInput: parts[0] = &work.recompute, parts[1] = &work.backward_input; break;
    case Phase::BackwardWeight: parts[0] = &work.backward_weight; break;
  }
  size_t all_to_alls = 0;
  const RoutedDispatch* d = nullptr;
  for (const PhaseWork* p : parts)
    if (p && !p->all_to_alls.empty()) all_to_alls += p->all_to_alls.size(), d = &p->dispatch;
  if (all_to_alls % 2 != 0) return model_s;  // not dispatch-and-combine pairs: not what the tables time
  const size_t pairs = all_to_alls / 2;
  const int per_node = links.in_node + 1;
  const int nodes = links.ranks / per_node;
  // DeepEP's tables are measured over whole nodes of 8 GPUs. (Megatron-Core's flex dispatcher runs with etp 1:
  // no etp collectives beside them.)
  if (!d || d->deepep == DeepEpKernels::None || d->tokens <= 0 || d->hidden <= 0 || per_node != 8 ||
      nodes * per_node != links.ranks || links.etp > 1)
    return model_s;
  const bool low_latency = d->deepep == DeepEpKernels::LowLatency;
  const KindBit kind = low_latency ? kDeepEpLowLatency : kDeepEp;
  bool on_gpu = false;
  const TableTime* dispatch = nullptr;
  const TableTime* combine = nullptr;
  const auto key = [&](bool first) { return AllToAllKey{low_latency, first, nodes, d->hidden, d->top_k, d->experts, d->tokens}; };
  {
    // Answers asked before are read under the shared lock (the plan search's threads ask again and again).
    std::shared_lock read(mutex_);
    const auto gpu = gpus_.find(links.gpu.name);
    const auto a = all_to_alls_.find(key(true)), b = all_to_alls_.find(key(false));
    if (gpu != gpus_.end() && gpu->second && a != all_to_alls_.end() && b != all_to_alls_.end())
      on_gpu = true, dispatch = &a->second, combine = &b->second;
  }
  if (!dispatch) {
    std::lock_guard lock(mutex_);
    on_gpu = on_gpu_locked(links.gpu);
    if (on_gpu) need(kind);
    if (on_gpu && has(kind)) {
      for (bool first : {true, false}) {
        auto it = all_to_alls_.find(key(first));
        if (it == all_to_alls_.end()) {
          it = all_to_alls_.emplace(key(first), low_latency ? queries_.deepep_low_latency(first, nodes, d->hidden, d->top_k,
                                                                                   d->experts, d->tokens)
                                                     : queries_.deepep_normal(first, nodes, d->hidden, d->top_k,
                                                                              d->experts, kDeepEpSms, d->tokens))
                   .first;
          if (!it->second.found()) {
            std::lock_guard noted(missing_mutex_);
            if (missing_.size() < kMaxMissing)
              missing_.push_back(fmt::format("DeepEP{} {} of {:g} tokens a rank (hidden {}, top {} of {} experts) over "
                                             "{} nodes: {}", low_latency ? " low-latency" : "",
                                             first ? "dispatch" : "combine", d->tokens, d->hidden, d->top_k,
                                             d->experts, nodes, it->second.note));
          }
        }
        (first ? dispatch : combine) = &it->second;
      }
    }
  }
  if (!on_gpu) {
    add(other_gpu_s_, model_s);
    add(phase_s_, model_s);
    return model_s;
  }
  if (!dispatch || !dispatch->found() || !combine->found()) {
    add(phase_s_, model_s);
    return model_s;
  }
  const double s = static_cast<double>(pairs) * (dispatch->seconds + combine->seconds);
  add(all_to_all_s_, s);
  add(phase_s_, s);
  return s;
}

TableCostModel::Share TableCostModel::share() const {
  Share s;
  s.gemm_s = seconds(gemm_s_);
  s.all_to_all_s = seconds(all_to_all_s_);
  s.attention_s = seconds(attention_s_);
  s.collective_s = seconds(collective_s_);
  s.phase_s = seconds(phase_s_);
  s.other_gpu_s = seconds(other_gpu_s_);
  {
    std::lock_guard lock(missing_mutex_);
    s.missing = missing_;
  }
  const auto count = [](const auto& cache, ShapeCounts& c) {
    for (const auto& [shape, t] : cache) {
      c.measured += t.how == TableHow::Measured;
      c.interpolated += t.how == TableHow::Interpolated;
      c.extrapolated += t.how == TableHow::Extrapolated;
      c.missing += t.how == TableHow::Missing;
    }
  };
  for (size_t i = 0; i < std::size(kKinds); ++i)
    if (absent_.load() & (1 << i)) s.absent.push_back(kKinds[i]);
  std::shared_lock read(mutex_);
  count(gemms_, s.gemms);
  count(attentions_, s.attentions);
  count(collectives_, s.collectives);
  count(decodes_, s.attentions);
  count(moes_, s.gemms);  // the routed experts' grouped GEMMs
  count(all_to_alls_, s.all_to_alls);
  return s;
}

}  // namespace pw
