#include "exports/megatron.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/units.hpp"
#include "core/version.hpp"
#include "core/work_estimate.hpp"
#include "schedules/generators.hpp"
#include "exports/exports.hpp"

namespace pw {
namespace {

// Embedding, transformer layers, DeepSeek's MTP modules, head: what Megatron-LM's layout names (E, t, m, L).
void check_layer_kinds(const Model& model, const char* what) {
  const int n = model.num_layers();
  bool ok = n >= 3 && model.layers.front().kind == LayerKind::Embedding && model.layers.back().kind == LayerKind::Head;
  bool mtp = false;
  for (int i = 1; ok && i + 1 < n; ++i) {
    const LayerKind k = model.layers[static_cast<size_t>(i)].kind;
    ok = k == LayerKind::Mtp || (k == LayerKind::Block && !mtp);
    mtp = mtp || k == LayerKind::Mtp;
  }
  if (!ok)
    throw_bad_input("{}: model '{}' is not an embedding, transformer layers, MTP modules and a head; Megatron-LM's layout "
                    "names only those (E, t, m, L)",
                    what, model.name);
}

std::string repeated(char symbol, int count) {
  if (count >= 4) return fmt::format("{}*{}", symbol, count);  // "t*k" is shorter than k t's from k = 4 on
  return std::string(static_cast<size_t>(std::max(count, 0)), symbol);
}

std::string stage_token(const Model& model, const LayerRange& r) {
  int blocks = 0, mtp = 0;
  for (int i = r.first; i <= r.last; ++i) {
    const LayerKind k = model.layers[static_cast<size_t>(i)].kind;
    blocks += k == LayerKind::Block ? 1 : 0;
    mtp += k == LayerKind::Mtp ? 1 : 0;
  }
  std::string out;
  if (r.first == 0) out += "E";
  out += repeated('t', blocks) + repeated('m', mtp);
  if (r.last == model.num_layers() - 1) out += "L";
  return out;
}

// "([0]*3+[1]*58)": the blocks' MoE flags as runs, or "([0,1]*24)" when a unit repeats.
std::string moe_layer_pattern(const TransformerConfig& c) {
  std::vector<int> flags;
  for (int i = 0; i < c.layers; ++i) flags.push_back(c.moe_block(i) ? 1 : 0);
  const int n = static_cast<int>(flags.size());
  for (int unit = 2; unit <= n / 2; ++unit) {
    if (n % unit != 0) continue;
    bool repeats = true;
    for (int i = unit; i < n && repeats; ++i) repeats = flags[static_cast<size_t>(i)] == flags[static_cast<size_t>(i % unit)];
    if (!repeats) continue;
    std::string body;
    for (int i = 0; i < unit; ++i) body += fmt::format("{}{}", i ? "," : "", flags[static_cast<size_t>(i)]);
    return fmt::format("([{}]*{})", body, n / unit);
  }
  std::string out;
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && flags[static_cast<size_t>(j)] == flags[static_cast<size_t>(i)]) ++j;
    out += fmt::format("{}[{}]*{}", out.empty() ? "" : "+", flags[static_cast<size_t>(i)], j - i);
    i = j;
  }
  return "(" + out + ")";
}

// Unrolls every match of "(...)*k" (group 1 repeated) or "x*k", left to right without overlap, as
// Python's re.sub does for Megatron's two patterns.
std::string unroll(const std::string& text, bool parenthesised) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t body_begin = 0, body_end = 0, star = 0;
    bool match = false;
    if (parenthesised && text[i] == '(') {
      const size_t close = text.find(')', i + 1);
      if (close != std::string::npos && close > i + 1 && close + 1 < text.size() && text[close + 1] == '*') {
        body_begin = i + 1;
        body_end = close;
        star = close + 1;
        match = true;
      }
    } else if (!parenthesised && i + 1 < text.size() && text[i + 1] == '*') {
      body_begin = i;
      body_end = i + 1;
      star = i + 1;
      match = true;
    }
    size_t digits_end = star + 1;
    if (match) {
      while (digits_end < text.size() && std::isdigit(static_cast<unsigned char>(text[digits_end]))) ++digits_end;
      match = digits_end > star + 1;
    }
    if (!match) {
      out += text[i++];
      continue;
    }
    const int k = std::stoi(text.substr(star + 1, digits_end - star - 1));
    for (int r = 0; r < k; ++r) out.append(text, body_begin, body_end - body_begin);
    i = digits_end;
  }
  return out;
}

bool same_ranges(const std::vector<LayerRange>& a, const std::vector<LayerRange>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const LayerRange& x, const LayerRange& y) {
           return x.first == y.first && x.last == y.last;
         });
}

// Megatron's split without a layout: the same number of transformer layers on every (virtual) stage.
std::vector<LayerRange> uniform_blocks(const Model& model, int stages) {
  return split_layers(model, stages, std::vector<int>(static_cast<size_t>(stages), model.num_blocks() / stages));
}

// What was simulated: fused attention (no s x s scores stored) or the unfused kernels. Transformer Engine
// runs attention sinks (gpt-oss's learnable softmax) in cuDNN's fused attention or unfused, never in
// FlashAttention (transformer_engine/pytorch/attention/dot_product_attention/utils.py at d0067d0,
// "Filter: Softmax type"), and Megatron's flash backend turns the other two off, leaving no kernel.
std::string attention_backend(const Evaluation& plan) {
  if (!plan.scenario.workload.flash_attention) return "unfused";
  const std::optional<TransformerConfig>& c = plan.scenario.model.transformer;
  return c && c->attention_sinks ? "fused" : "flash";
}

}  // namespace

// The routed experts, latent attention and MTP modules as Megatron-Core's TransformerConfig and
// MLATransformerConfig take them (megatron/training/arguments.py generates these flags from their fields).
template <typename Add>
void add_expert_arguments(const Evaluation& plan, Add add) {
  const Scenario& s = plan.scenario;
  const ParallelConfig& pc = s.parallel;
  const TransformerConfig& c = *s.model.transformer;
  if (c.mla) {
    add("--multi-latent-attention", "");
    // The command line's defaults differ from MLATransformerConfig's: every rank given.
    if (c.mla->q_lora_rank > 0) add("--q-lora-rank", std::to_string(c.mla->q_lora_rank));
    add("--kv-lora-rank", std::to_string(c.mla->kv_lora_rank));
    add("--qk-head-dim", std::to_string(c.mla->qk_nope_head_dim));
    add("--qk-pos-emb-head-dim", std::to_string(c.mla->qk_rope_head_dim));
    add("--v-head-dim", std::to_string(c.mla->v_head_dim));
  }
  if (c.mtp_layers > 0) add("--mtp-num-layers", std::to_string(c.mtp_layers));
  if (!c.moe) return;
  const MoeConfig& m = *c.moe;
  // transformer_config.py: "Bias in Moe is only supported when ETP==1".
  if (m.expert_bias && pc.etp > 1)
    throw_bad_input("--etp: Megatron-Core runs experts with biases (gpt-oss) only at expert tensor parallelism 1, not "
                    "{}; plan with --etp 1",
                    pc.etp);
  add("--num-experts", std::to_string(m.experts));
  add("--moe-router-topk", std::to_string(m.top_k));
  add("--moe-ffn-hidden-size", std::to_string(m.expert_ffn));
  if (m.shared_expert_ffn > 0) add("--moe-shared-expert-intermediate-size", std::to_string(m.shared_expert_ffn));
  if (m.shared_expert_gate) add("--moe-shared-expert-gate", "");
  // An int k would make blocks 0, k, 2k, ... MoE; the list names each block (1: MoE), as a Python expression
  // without spaces (arguments.py's _eval_pattern allows digits, commas, brackets, parentheses, + and *).
  bool all = true;
  for (int i = 0; i < c.layers; ++i) all = all && c.moe_block(i);
  if (!all) add("--moe-layer-freq", moe_layer_pattern(c));
  // DeepSeek-V3's routing: sigmoid scores with a bias per expert for the choice, top k inside the best
  // groups, the routed output scaled.
  if (m.router_score_bias) {
    add("--moe-router-score-function", "sigmoid");
    add("--moe-router-enable-expert-bias", "");
  }
  if (m.groups > 0) {
    add("--moe-router-num-groups", std::to_string(m.groups));
    add("--moe-router-group-topk", std::to_string(m.top_groups));
  }
  if (m.routed_scaling != 1.0) add("--moe-router-topk-scaling-factor", fmt::format("{:g}", m.routed_scaling));
  add("--expert-model-parallel-size", std::to_string(pc.ep));
  add("--expert-tensor-parallel-size", std::to_string(pc.etp));  // Megatron's default is tp
  // What was simulated: grouped GEMMs for the local experts, all-to-all dispatch and combine.
  add("--moe-grouped-gemm", "");
  // flex: DeepEP, which sends one copy per token and node (transformer_config.py's
  // moe_flex_dispatcher_backend, whose default it is, named so that a changed default changes nothing).
  add("--moe-token-dispatcher-type", to_string(s.workload.dispatcher));
  if (s.workload.dispatcher == Workload::Dispatcher::Flex) add("--moe-flex-dispatcher-backend", "deepep");
  if (s.schedule == "interleaved-overlap") {
    // transformer_config.py's rules for overlap_moe_expert_parallel_comm: ep > 1, no full recompute, at most
    // one MTP layer; delay_wgrad_compute needs it and lets the weight gradients follow the other's dgrad.
    if (s.workload.recompute == Recompute::Full)
      throw_bad_input("--recompute: Megatron-Core's --overlap-moe-expert-parallel-comm does not run with full "
                      "recompute; use none or selective with interleaved-overlap");
    if (c.mtp_layers > 1)
      throw_bad_input("--export megatron: --overlap-moe-expert-parallel-comm takes at most one MTP layer, '{}' has {}",
                      s.model.name, c.mtp_layers);
    add("--overlap-moe-expert-parallel-comm", "");
    add("--delay-wgrad-compute", "");
  }
  if (s.workload.capacity_factor > 0) {
    add("--moe-expert-capacity-factor", fmt::format("{:g}", s.workload.capacity_factor));
    add("--moe-pad-expert-input-to-capacity", "");
  }
}

std::vector<std::string> megatron_schedules() {
  std::vector<std::string> out;
  for (const std::string& s : schedule_names())
    if (s == "1f1b" || s == "interleaved" || s == "interleaved-overlap" || s == "bfs") out.push_back(s);
  return out;
}

std::string megatron_layout(const Model& model, const std::vector<LayerRange>& ranges) {
  check_layer_kinds(model, "--export megatron");
  std::vector<std::string> tokens;
  int mtp_stages = 0;
  for (const LayerRange& r : ranges) {
    tokens.push_back(stage_token(model, r));
    mtp_stages += tokens.back().find('m') != std::string::npos ? 1 : 0;
  }
  // pipeline_parallel_layer_layout.py: all m in one virtual stage.
  if (mtp_stages > 1)
    throw_bad_input("--export megatron: the split puts the MTP modules of '{}' on {} stages; Megatron-LM keeps them in "
                    "one (plan with --split so that they share the last stage)",
                    model.name, mtp_stages);
  std::string out;
  const size_t n = tokens.size();
  size_t i = 0;
  // Every stage but the last is followed by "|"; a run of r equal such stages "X|X|...X|" becomes "(X|)*r"
  // when that is shorter, with a cosmetic comma before what follows.
  while (i < n) {
    if (i + 1 == n) {
      out += tokens[i];
      break;
    }
    size_t j = i;
    while (j + 1 < n - 1 && tokens[j + 1] == tokens[i]) ++j;
    const size_t run = j - i + 1;  // stages i..j, all followed by "|"
    const std::string unit = tokens[i] + "|";
    const std::string grouped = fmt::format("({})*{}", unit, run);
    if (run > 1 && grouped.size() < run * unit.size()) {
      out += grouped;
      if (j + 1 < n) out += ",";
    } else {
      for (size_t k = 0; k < run; ++k) out += unit;
    }
    i = j + 1;
  }
  return out;
}

std::vector<LayerRange> parse_megatron_layout(const std::string& layout, const Model& model) {
  check_layer_kinds(model, "--pipeline-model-parallel-layout");
  std::string text;
  for (char c : layout)
    if (c != ',' && !std::isspace(static_cast<unsigned char>(c))) text += c;
  text = unroll(unroll(text, true), false);
  const int n = model.num_layers();
  std::vector<LayerRange> out;
  int next = 0;  // the next pipewright layer
  size_t begin = 0;
  for (int stage = 0;; ++stage) {
    const size_t end = std::min(text.find('|', begin), text.size());
    const std::string part = text.substr(begin, end - begin);
    if (part.empty())
      throw_bad_input("--pipeline-model-parallel-layout '{}': stage {} is empty; pipewright stages hold at least one layer",
                      layout, stage);
    const int first = next;
    for (char c : part) {
      if (c == 'E') {
        if (next != 0)
          throw_bad_input("--pipeline-model-parallel-layout '{}': the embedding E must come first, found it in stage {}",
                          layout, stage);
        ++next;
      } else if (c == 't' || c == 'm') {
        const LayerKind want = c == 't' ? LayerKind::Block : LayerKind::Mtp;
        if (next == 0 || next >= n - 1 || model.layers[static_cast<size_t>(next)].kind != want)
          throw_bad_input("--pipeline-model-parallel-layout '{}': {} t and {} m, but model '{}' has {} transformer layers "
                          "then {} MTP modules after the embedding",
                          layout, std::count(text.begin(), text.end(), 't'), std::count(text.begin(), text.end(), 'm'),
                          model.name, model.num_blocks(), model.transformer ? model.transformer->mtp_layers : 0);
        ++next;
      } else if (c == 'L') {
        if (next != n - 1)
          throw_bad_input("--pipeline-model-parallel-layout '{}': the loss L must follow all {} transformer layers of '{}'",
                          layout, model.num_blocks(), model.name);
        ++next;
      } else {
        throw_bad_input("--pipeline-model-parallel-layout '{}': '{}' is not a layer; use E (embedding), t (transformer "
                        "layer), m (MTP module) or L (loss)",
                        layout, c);
      }
    }
    out.push_back(LayerRange{first, next - 1});
    if (end == text.size()) break;
    begin = end + 1;
  }
  if (next != n)
    throw_bad_input("--pipeline-model-parallel-layout '{}': covers {} of the {} layers of '{}' (E, {} t, L)", layout, next,
                    n, model.name, model.num_blocks());
  return out;
}

// The model's shape and kind as Megatron-LM's command line takes them (megatron/training/arguments.py at
// d98e8a6 generates most from megatron/core/transformer/transformer_config.py's fields): without them
// pretrain_gpt.py builds its own default model, in fp32 with dropout, not the one simulated.
template <typename Add>
void add_model_arguments(const Scenario& s, Add add) {
  const TransformerConfig& c = *s.model.transformer;
  if (c.mlp == MlpKind::GeGlu)
    throw_bad_input("--export megatron: Megatron-LM's command line has no gelu-gated MLP (GeGLU, as '{}' runs): it "
                    "offers --swiglu, --quick-geglu and --squared-relu; export to torchtitan, or describe the model with "
                    "\"mlp\": \"swiglu\" (the same cost)",
                    s.model.name);
  add("--bf16", "");  // fp8 plans too: Transformer Engine's fp8 GEMMs inside a bf16 model
  add("--hidden-size", std::to_string(c.hidden));
  add("--num-attention-heads", std::to_string(c.heads));
  add("--ffn-hidden-size", std::to_string(c.ffn));
  if (!c.mla && c.kv_heads != c.heads) {
    add("--group-query-attention", "");
    add("--num-query-groups", std::to_string(c.kv_heads));
  }
  // arguments.py takes hidden / heads otherwise.
  if (!c.mla && static_cast<long>(c.head_dim) * c.heads != c.hidden) add("--kv-channels", std::to_string(c.head_dim));
  add("--max-position-embeddings", std::to_string(std::max(c.max_seq_len, s.workload.seq_len)));
  add("--position-embedding-type", c.learned_positions ? "learned_absolute" : "rope");
  add("--normalization", c.norm == NormKind::RmsNorm ? "RMSNorm" : "LayerNorm");
  if (c.attention_sinks) {
    // gpt-oss, the one family with attention sinks: its experts' clamped GLU (x * sigmoid(1.702 x), up + 1,
    // clamped at 7) as Megatron-LM's examples/gptoss/02_train.sh writes it, and its learnable softmax offset.
    add("--quick-geglu", "");
    add("--glu-linear-offset", "1.0");
    add("--activation-func-clamp-value", "7.0");
    add("--softmax-type", "learnable");
  } else if (c.mlp == MlpKind::SwiGlu) {
    add("--swiglu", "");
  } else if (c.mlp == MlpKind::ReluSquared) {
    add("--squared-relu", "");
  }
  if (!c.tied_embeddings) add("--untie-embeddings-and-output-weights", "");
  if (!c.bias) add("--disable-bias-linear", "");
  if (!c.bias && c.qkv_bias) add("--add-qkv-bias", "");
  if (c.qk_norm) add("--qk-layernorm", "");
  if (c.attention_window > 0) {
    // Transformer Engine's (left, right) window: the query itself and window - 1 keys before it.
    add("--window-size", fmt::format("{},0", c.attention_window - 1));
    if (c.full_attention_every > 0) add("--window-attn-skip-freq", std::to_string(c.full_attention_every));
  }
  // Megatron-LM's defaults are 0.1; a model without dropout stores no masks, as simulated.
  if (!c.dropout) {
    add("--attention-dropout", "0");
    add("--hidden-dropout", "0");
  }
}

std::vector<std::string> megatron_arguments(const Evaluation& plan) {
  const Scenario& s = plan.scenario;
  const ParallelConfig& pc = s.parallel;
  const std::vector<std::string> runs = megatron_schedules();
  if (std::find(runs.begin(), runs.end(), s.schedule) == runs.end())
    throw_bad_input("--export megatron: Megatron-LM runs 1f1b, interleaved, interleaved-overlap and bfs, not {}; plan "
                    "with --schedules 1f1b,interleaved,interleaved-overlap,bfs",
                    s.schedule);
  if (pc.dp_cp() > 1) check_zero_level(ExportTarget::Megatron, pc.zero);
  if (s.workload.recompute == Recompute::Selective && s.workload.recompute_modules.has(RecomputeModule::Elementwise))
    throw_bad_input("--recompute-modules: Megatron-Core has no module that rebuilds the norms' and activations' "
                    "outputs alone (elementwise); plan with layernorm and moe_act, or without elementwise");
  if (s.schedule == "interleaved-overlap" && pc.ep < 2)
    throw_bad_input("--ep: Megatron-Core overlaps the expert all-to-alls (interleaved-overlap) only with expert "
                    "parallelism; plan with --ep 2 or more, or --schedules interleaved");
  const int chunks = plan.schedule.num_stages() / pc.pp;
  if (chunks > 1 && pc.pp < 2)
    throw_bad_input("--export megatron: Megatron-LM's interleaved schedule needs --pp 2 or more, got pp 1 with vpp {}", chunks);
  std::vector<LayerRange> ranges;
  for (const StageReport& st : plan.stages) ranges.push_back(st.layers);
  const Model& model = s.model;
  check_layer_kinds(model, "--export megatron");

  std::vector<std::string> a;
  auto add = [&](std::string flag, std::string value = "") {
    a.push_back(std::move(flag));
    if (!value.empty()) a.push_back(std::move(value));
  };
  add("--tensor-model-parallel-size", std::to_string(pc.tp));
  add("--pipeline-model-parallel-size", std::to_string(pc.pp));
  if (pc.cp > 1) add("--context-parallel-size", std::to_string(pc.cp));
  if (pc.tp > 1 && s.workload.sequence_parallel) add("--sequence-parallel");
  add("--num-layers", std::to_string(model.num_blocks()));
  add_model_arguments(s, add);
  add("--seq-length", std::to_string(s.workload.seq_len));
  add("--micro-batch-size", std::to_string(s.workload.micro_batch_size));
  add("--global-batch-size", std::to_string(s.global_batch_size));
  // Megatron's own split: L / (pp x vpp) layers per stage, the embedding first and the loss last.
  const int stages = static_cast<int>(ranges.size());
  const bool even = model.num_blocks() % stages == 0 && same_ranges(ranges, uniform_blocks(model, stages));
  if (!even && stages > 1)
    add("--pipeline-model-parallel-layout", megatron_layout(model, ranges));
  else if (chunks > 1)
    add("--num-virtual-stages-per-pipeline-rank", std::to_string(chunks));
  if (chunks > 1) {
    const int group = s.schedule == "bfs" ? pc.microbatches : interleaved_group_size(s);
    if (group != pc.pp) add("--microbatch-group-size-per-virtual-pipeline-stage", std::to_string(group));
  }
  if (s.workload.recompute == Recompute::Selective) {
    add("--recompute-granularity", "selective");
    // A list (nargs "+", as megatron/training/argument_utils.py makes List[str] fields); core_attn alone is
    // TransformerConfig's default.
    if (!s.workload.recompute_modules.is_default()) {
      add("--recompute-modules");
      for (const std::string& name : module_names(s.workload.recompute_modules)) a.push_back(name);
    }
  }
  if (s.workload.recompute == Recompute::Full) {
    add("--recompute-granularity", "full");
    add("--recompute-method", "uniform");
    add("--recompute-num-layers", "1");
  }
  // The dp-cp group reduces the gradients and shards the optimizer state, cp ranks included.
  const bool reduced = pc.dp_cp() > 1;
  // The precision-aware optimizer raises without the distributed optimizer, even on one dp rank
  // (megatron/core/optimizer/__init__.py).
  const bool precision_aware = pc.optimizer_precision.precision_aware;
  if (pc.distributed_optimizer() && (reduced || precision_aware)) add("--use-distributed-optimizer");
  // Hybrid sharding: Megatron's partial distributed optimizer, one instance per shard group.
  if (pc.distributed_optimizer() && pc.dp_replicas() > 1)
    add("--num-distributed-optimizer-instances", std::to_string(pc.dp_replicas()));
  // Megatron's flags are off by default (store_true); the simulation reduced in overlapped buckets.
  if (pc.overlap_grad_reduce && reduced) add("--overlap-grad-reduce");
  if (pc.overlap_param_gather && pc.overlap_grad_reduce && pc.distributed_optimizer() && reduced)
    add("--overlap-param-gather");
  if (pc.bucket_parameters > 0 && reduced) add("--ddp-bucket-size", fmt::format("{:.0f}", pc.bucket_parameters));
  // Without it Megatron-LM accumulates and reduces bf16 runs' gradients in fp32 (arguments.py sets
  // accumulate_allreduce_grads_in_fp32), as simulated by default.
  if (pc.grad_reduce_in_bf16) add("--grad-reduce-in-bf16");
  if (precision_aware) {
    // megatron/training/arguments.py: both dtypes default to fp32.
    add("--use-precision-aware-optimizer");
    add("--exp-avg-dtype", to_string(pc.optimizer_precision.exp_avg));
    add("--exp-avg-sq-dtype", to_string(pc.optimizer_precision.exp_avg_sq));
  }
  add("--attention-backend", attention_backend(plan));
  if (s.workload.precision == Precision::Fp8) {
    // Transformer Engine's fp8 linear layers: e4m3 forward, e5m2 gradients, delayed scaling.
    add("--fp8-format", "hybrid");
    add("--fp8-recipe", "delayed");
  }
  // Megatron-LM's default order is tp-cp-ep-dp-pp (pp outermost); this flag makes it tp-cp-ep-pp-dp.
  if (pc.order == RankOrder::TpPpDp && pc.pp > 1 && pc.dp > 1) add("--use-tp-pp-dp-mapping");
  add_expert_arguments(plan, add);
  return a;
}

ExportFile megatron_export(const Evaluation& plan) {
  const std::vector<std::string> args = megatron_arguments(plan);
  const Scenario& s = plan.scenario;
  std::string text = fmt::format(
      "# pipewright {}: {} on {}, {} GPUs, {} schedule; predicted {} per step, {} peak memory.\n"
      "# Megatron-LM arguments (megatron/training/arguments.py at d98e8a6): the model, its parallel layout, batch,\n"
      "# precision and recomputation as simulated. Add the data, the tokenizer (its vocabulary is {}; Megatron-LM\n"
      "# pads it to a multiple of 128 x tp) and the optimizer's schedule, and run them as\n"
      "#   source megatron_args.sh && torchrun ... pretrain_gpt.py \"${{PIPEWRIGHT_MEGATRON_ARGS[@]}}\" <data, tokenizer, "
      "learning-rate arguments>\n"
      "PIPEWRIGHT_MEGATRON_ARGS=(\n",
      kVersion, s.model.name, s.cluster.name, s.parallel.gpus(), s.schedule, format_seconds(plan.metrics.step_time_s),
      format_bytes(plan.metrics.peak_memory_bytes), with_commas(s.model.transformer->vocab));
  for (size_t i = 0; i < args.size(); ++i) {
    text += "  " + args[i];
    while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {  // its values, one or a list
      const std::string& v = args[++i];
      const bool quote = v.find_first_of("|*()") != std::string::npos;
      text += quote ? " '" + v + "'" : " " + v;
    }
    text += "\n";
  }
  text += ")\n";
  return ExportFile{"megatron_args.sh", text};
}

}  // namespace pw
