#include "cli/scenario_options.hpp"

#include "kernels/installed_tables.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "core/error.hpp"

namespace pw {

void ScenarioOptions::add_to(CLI::App& cmd, bool model_and_cluster_required) {
  auto* model_opt = cmd.add_option(
      "--model", model, "Model preset (see `pipewright models`), Hugging Face config.json or pipewright model JSON");
  auto* cluster_opt = cmd.add_option("--cluster", cluster, "Cluster preset (see `pipewright clusters`) or cluster JSON");
  if (model_and_cluster_required) {
    model_opt->required();
    cluster_opt->required();
  }
  cmd.add_option("--tp", tp, "Tensor-parallel degree (inside a node)");
  cmd.add_option("--cp", cp, "Context-parallel degree: each sequence split over this many GPUs (ring attention)");
  cmd.add_option("--ep", ep,
                 "Expert-parallel degree: each MoE layer's routed experts spread over this many GPUs, folded into the "
                 "tp x cp x dp GPUs of a stage (Megatron-Core's parallel folding)");
  cmd.add_option("--etp", etp, "Expert tensor-parallel degree: each routed expert's matrices split over this many GPUs");
  moe_options.add_to(cmd);
  cmd.add_option("--pp", pp, "Pipeline-parallel degree (ranks)");
  cmd.add_option("--dp", dp, "Data-parallel degree");
  // Checked as given, whichever schedule would use them (compare runs schedules that ignore them).
  cmd.add_option("--vpp", vpp, "Model chunks per pipeline rank (interleaved)")->check(CLI::Range(1L, kMaxLayers));
  auto* m = cmd.add_option("--microbatches", microbatches, "Micro-batches per pipeline per iteration");
  auto* g = cmd.add_option("--global-batch-size", global_batch_size, "Sequences per iteration over all replicas");
  m->excludes(g);
  cmd.add_option("--micro-batch-size", micro_batch_size, "Sequences per micro-batch");
  cmd.add_option("--seq-len", seq_len, "Sequence length (default: the model's)");
  cmd.add_option("--schedule", schedule, fmt::format("Pipeline schedule: {}", fmt::join(schedule_names(), ", ")))
      ->capture_default_str();
  cmd.add_option("--max-pending", max_pending,
                 "zb-h1/zb-h2: most micro-batches awaiting their W per rank, from pp (zb-h1) to 2 pp (zb-h2)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--split", split, "Transformer layers per stage (per chunk with --vpp), e.g. 24,24,24,24");
  cmd.add_option("--stage-recompute", stage_recompute, "Each stage's recompute level, e.g. full,full,none,none (per-stage)");
  cmd.add_option("--rank-order", rank_order, "Where ranks sit: tp-pp-dp (default) or tp-dp-pp (tp innermost)");
  cmd.add_option("--recompute", recompute, "none, selective or full")->capture_default_str();
  add_recompute_modules_option(cmd, recompute_modules);
  cmd.add_flag("--no-sequence-parallel", no_sequence_parallel, "Turn off sequence parallelism (on by default with tp > 1)");
  add_flash_attention_flag(cmd, flash_attention);
  add_precision_option(cmd, precision);
  add_activation_fp8_input_store_flag(cmd, activation_fp8_input_store);
  dp_options.add_to(cmd);
  add_memory_headroom_option(cmd, memory_headroom);
  cmd.add_option("--memory-accounting", memory_accounting,
                 "Whose activation memory to count: gpu-bf16 (a GPU framework's bf16 tensors), cpu-float32 or "
                 "cuda-bf16 / cuda-float32 (what pipewright's cpu or cuda backend keeps; run counts its backend's)")
      ->capture_default_str();
  cmd.add_option("--cost-param", cost_params, "Override a cost-model parameter, NAME=VALUE (docs/cost-model.md); repeatable");
  cmd.add_option("--group-size", group_size, "Interleaved: micro-batch group size (default pp; = micro-batches is breadth-first)")
      ->check(CLI::NonNegativeNumber);
}

CLI::Option* add_recompute_modules_option(CLI::App& cmd, std::string& modules) {
  return cmd.add_option("--recompute-modules", modules,
                        "What selective recomputation reruns, as Megatron-Core's --recompute-modules: core_attn "
                        "(default), layernorm, moe_act, mla_up_proj, mlp, shared_experts; or elementwise (not "
                        "Megatron's: the norms' and activations' outputs, every GEMM and attention output kept); e.g. "
                        "layernorm,moe_act");
}

CLI::Option* add_precision_option(CLI::App& cmd, std::string& precision) {
  return cmd
      .add_option("--precision", precision,
                  "bf16, or fp8 as Transformer Engine runs it (the blocks' GEMMs at the GPU's fp8 peak, attention, "
                  "norms, embedding and head in bf16)")
      ->capture_default_str();
}

void add_activation_fp8_input_store_flag(CLI::App& cmd, bool& store) {
  cmd.add_flag("--activation-func-fp8-input-store", store,
               "Keep a SwiGLU's input (fc1's gate and up: dense MLP, routed and shared experts) in fp8 for the "
               "backward, as Megatron-Core's TransformerConfig.activation_func_fp8_input_store does (the DeepSeek-V3 "
               "report's MoE SwiGLU inputs)");
}

void add_flash_attention_flag(CLI::App& cmd, bool& flash_attention) {
  cmd.add_flag("--flash-attention,!--no-flash-attention", flash_attention,
               "Fused attention, on by default (FlashAttention: no s x s scores stored); --no-flash-attention stores "
               "them as 2021-era Megatron-LM runs did");
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    out.push_back(text.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

std::vector<int> parse_split(const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_commas(text)) {
    int value = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < 0)
      throw_bad_input("--split: '{}' is not a layer count; give transformer layers per stage such as 24,24,24,24", item);
    out.push_back(value);
  }
  return out;
}

std::vector<OptionPath> ScenarioOptions::input_paths() const {
  return {{"--model", model},     {"--cluster", cluster},         {"--plan", plan},
          {"--profile", profile}, {"--calibration", calibration}, {"--kernels", kernels}};
}

std::vector<OptionPath> ScenarioOptions::plan_input_paths(const std::optional<PlanDocument>& doc) const {
  if (!doc || !doc->profile || !profile.empty()) return {};
  return {{"the profile --plan names", doc->profile->path}};
}

void ScenarioOptions::add_profile_option(CLI::App& cmd) {
  cmd.add_option("--profile", profile,
                 "Profile JSON from `pipewright profile`: measured layer times, link and optimizer replace the "
                 "analytic ones where present");
  add_force_profile_option(cmd, force_profile);
  add_calibration_option(cmd, calibration);
  add_kernels_option(cmd, kernels);
}

// --kernels installed: the folder installed for the scenario's GPU.
std::string ScenarioOptions::kernels_folder(const std::optional<PlanDocument>& doc) const {
  if (kernels != "installed") return kernels;
  return resolve_kernels_option(kernels, scenario_of(doc).cluster.gpu);
}

CostModelChain ScenarioOptions::cost_models(const Model& m, const AnalyticCostParams& defaults) const {
  CostModelChain chain(cost_params, defaults);
  chain.add_kernels(kernels_folder(std::nullopt));
  if (!profile.empty()) chain.add_profile_file(profile, m, "--profile", force_profile);
  add_calibration(chain, calibration);
  return chain;
}

AnalyticCostModel ScenarioOptions::cost_model() const {
  AnalyticCostParams params;
  for (const std::string& assignment : cost_params) set_param(params, assignment);
  return AnalyticCostModel(params);
}

Scenario ScenarioOptions::to_scenario() const {
  if (model.empty()) throw_bad_input("--model: give a model preset, config.json or pipewright model JSON");
  if (cluster.empty()) throw_bad_input("--cluster: give a cluster preset or cluster JSON");
  Scenario s;
  s.model = load_for_option("--model", model, load_model);
  s.cluster = load_for_option("--cluster", cluster, load_cluster);
  apply_memory_headroom(memory_headroom, s.cluster);
  s.parallel.tp = tp;
  s.parallel.cp = cp;
  s.parallel.ep = ep;
  s.parallel.etp = etp;
  s.parallel.pp = pp;
  s.parallel.dp = dp;
  s.parallel.vpp = vpp;
  if (!microbatches && !global_batch_size)
    throw_bad_input("give --microbatches (per pipeline) or --global-batch-size (sequences per iteration)");
  if (global_batch_size) {
    if (*global_batch_size < 1) throw_bad_input("--global-batch-size: must be at least 1, got {}", *global_batch_size);
    s.global_batch_size = *global_batch_size;
  } else {
    s.parallel.microbatches = *microbatches;
  }
  s.workload.micro_batch_size = micro_batch_size;
  s.workload.seq_len = seq_len;
  s.workload.tp = tp;
  s.workload.cp = cp;
  s.workload.ep = ep;
  s.workload.etp = etp;
  moe_options.apply(s.workload);
  s.workload.sequence_parallel = !no_sequence_parallel;
  s.workload.flash_attention = flash_attention;
  s.workload.activation_fp8_input_store = activation_fp8_input_store;
  s.workload.precision = precision_from_string(precision);
  s.workload.memory = memory_accounting_from_string(memory_accounting);
  s.workload.recompute = recompute_from_string(recompute.c_str());
  dp_options.apply(s.parallel);
  dp_options.check_grad_sync_levels({s.parallel.zero});
  s.schedule = schedule;
  s.group_size = group_size;
  s.max_pending = max_pending;
  if (!split.empty()) s.split = parse_split(split);
  if (!stage_recompute.empty())
    for (const std::string& level : split_commas(stage_recompute)) {
      if (level != "none" && level != "selective" && level != "full")
        throw_bad_input("--stage-recompute: '{}' is not a level; give none, selective or full per stage, e.g. full,none", level);
      s.stage_recompute.push_back(recompute_from_string(level.c_str()));
    }
  if (!rank_order.empty()) s.parallel.order = rank_order_from_string(rank_order);
  if (!recompute_modules.empty()) {
    s.workload.recompute_modules = recompute_modules_from_string(recompute_modules);
    if (!s.selective_somewhere())
      throw_bad_input("--recompute-modules: the modules are what selective recomputation reruns; add --recompute "
                      "selective (or a selective level in --stage-recompute)");
  }
  return s;
}

namespace {

// The scenario options a plan file replaces; giving one with --plan would be ambiguous.
constexpr const char* kPlanFixes[] = {"--model", "--cluster", "--tp", "--cp", "--ep", "--etp", "--capacity-factor", "--dispatcher", "--pp", "--dp", "--vpp", "--microbatches",
                                      "--global-batch-size", "--micro-batch-size", "--seq-len", "--schedule",
                                      "--schedule-csv", "--max-pending", "--split", "--recompute", "--recompute-modules", "--stage-recompute",
                                      "--rank-order", "--no-sequence-parallel", "--flash-attention", "--group-size",
                                      "--activation-func-fp8-input-store"};

// The plan's profile again, read from where the plan recorded it.
void add_plan_profile(CostModelChain& chain, const std::string& plan, const PlanProfile& recorded, const Model& model) {
  const std::string made_with = fmt::format("the profile '{}' ({} on {})", recorded.path, recorded.tool, recorded.machine);
  try {
    // Checked against the model when the plan was made (or forced then): not again.
    chain.add_profile_file(recorded.path, model, "", /*force=*/true);
  } catch (const Error& e) {
    throw_bad_input("--plan: {} was made with {}, which cannot be read now: {}; pass --profile FILE again", plan,
                    made_with, e.what());
  }
  const ProfileOrigin& now = *chain.profile_origin();
  if (now.tool != recorded.tool || now.machine != recorded.machine)
    throw_bad_input("--plan: {} was made with {}, but that file now holds {} on {}; pass --profile FILE again", plan,
                    made_with, now.tool, now.machine);
}

}  // namespace

void ScenarioOptions::add_plan_option(CLI::App& cmd, const std::string& what) {
  cmd.add_option("--plan", plan, what + " the plan in this file (pipewright plan --out) instead of --model, ...");
}

void ScenarioOptions::check_plan_alone(const CLI::App& cmd) const {
  if (plan.empty()) return;
  for (const char* name : kPlanFixes) {
    const CLI::Option* option = cmd.get_option_no_throw(name);
    if (option && option->count() > 0)
      throw_bad_input("--plan: the plan file gives the scenario; drop {} (only --cost-param adds to a plan)", name);
  }
}

std::optional<PlanDocument> ScenarioOptions::plan_document() const {
  if (plan.empty()) return std::nullopt;
  return load_plan(plan);
}

Scenario ScenarioOptions::scenario_of(const std::optional<PlanDocument>& doc) const {
  if (!doc) return to_scenario();
  // A plan does not say which executor runs it: the option's accounting applies to it too.
  Scenario s = doc->scenario;
  s.workload.memory = memory_accounting_from_string(memory_accounting);
  apply_memory_headroom(memory_headroom, s.cluster);  // what to keep free is the user's call, whoever made the plan
  return s;
}

CostModelChain ScenarioOptions::cost_models(const Model& m, const std::optional<PlanDocument>& doc,
                                            const AnalyticCostParams& defaults) const {
  if (!doc) return cost_models(m, defaults);
  std::vector<std::string> overrides = doc->cost_overrides;
  overrides.insert(overrides.end(), cost_params.begin(), cost_params.end());
  CostModelChain chain(overrides, defaults);
  chain.add_kernels(kernels_folder(doc));
  if (!profile.empty())
    chain.add_profile_file(profile, m, "--profile", force_profile);
  else if (doc->profile)
    add_plan_profile(chain, plan, *doc->profile, m);
  add_calibration(chain, calibration);
  return chain;
}

}  // namespace pw
