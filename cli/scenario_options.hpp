#pragma once
// The options that describe a scenario (model, cluster, degrees, batch, schedule, split), shared by the
// commands that take one (simulate now; plan and run reuse them).
#include <CLI/CLI.hpp>

#include "cli/dp_options.hpp"
#include <fmt/format.h>

#include <optional>
#include <string>

#include "cli/cost_model_chain.hpp"
#include "cli/memory_headroom_option.hpp"
#include "cli/output_path.hpp"
#include "core/analytic_cost_model.hpp"
#include "cli/moe_options.hpp"
#include "core/error.hpp"
#include "planner/plan_file.hpp"
#include "sim/scenario.hpp"

namespace pw {

struct ScenarioOptions {
  std::string model;
  std::string cluster;
  int tp = 1, cp = 1, pp = 1, dp = 1, vpp = 1;
  int ep = 1, etp = 1;          // expert parallelism (core/expert_parallel.hpp)
  MoeOptions moe_options;
  std::optional<int> microbatches;
  std::optional<int> global_batch_size;
  int micro_batch_size = 1;
  int seq_len = 0;
  std::string schedule = "1f1b";
  std::string split;
  std::string stage_recompute;  // one level per stage, comma-separated
  std::string rank_order;
  std::string recompute = "none";
  std::string recompute_modules;  // Megatron's module names, comma-separated; empty: core_attn
  bool no_sequence_parallel = false;
  bool flash_attention = true;  // --no-flash-attention turns it off
  bool activation_fp8_input_store = false;
  std::string precision = "bf16";
  DpOptions dp_options;
  std::string memory_headroom;  // --memory-headroom, "5%"; empty: the cluster's (cli/memory_headroom_option.hpp)
  std::string memory_accounting = "gpu-bf16";  // whose activations the memory counts (core/memory_accounting.hpp)
  int group_size = 0;
  int max_pending = 0;
  std::vector<std::string> cost_params;  // NAME=VALUE overrides of the analytic cost model
  std::string profile;                   // --profile: measured layer times, link and optimizer (add_profile_option)
  bool force_profile = false;            // --force-profile: a profile of another model's shape is used anyway
  std::string calibration;               // --calibration: a fitted cost model on top (add_profile_option)
  std::string kernels;                   // --kernels: a folder of kernel tables (add_profile_option)
  std::string plan;                      // --plan: a plan file gives the scenario (add_plan_option)

  // `model_and_cluster_required` false: --model and --cluster may be left out (another option, such as
  // simulate --plan, gives the scenario); to_scenario() then asks for them.
  void add_to(CLI::App& cmd, bool model_and_cluster_required = true);
  // Loads the model and cluster and parses the split; BadInput on anything wrong.
  Scenario to_scenario() const;
  // --profile and --calibration, for the commands that predict with measurements.
  void add_profile_option(CLI::App& cmd);
  // The analytic cost model with the --cost-param overrides applied.
  AnalyticCostModel cost_model() const;
  // The chain analytic (`defaults`, then --cost-param) <- profiled (--profile, when given) <- calibrated
  // (--calibration) for `model`'s layers.
  CostModelChain cost_models(const Model& model, const AnalyticCostParams& defaults = {}) const;

  // --plan FILE (`pipewright plan --out`) instead of the scenario options; `what` says what it does.
  void add_plan_option(CLI::App& cmd, const std::string& what);
  // The files this scenario is read from (--model, --cluster, --plan, --profile, --calibration), for
  // check_outputs.
  std::vector<OptionPath> input_paths() const;
  // The profile the plan file recorded, which the command reads again unless --profile replaces it.
  std::vector<OptionPath> plan_input_paths(const std::optional<PlanDocument>& doc) const;

  // BadInput when --plan comes with an option the plan fixes.
  void check_plan_alone(const CLI::App& cmd) const;
  // The plan file, when --plan gives one.
  std::optional<PlanDocument> plan_document() const;
  // The plan's scenario, or the options'.
  Scenario scenario_of(const std::optional<PlanDocument>& doc) const;
  // --kernels, with "installed" resolved to the folder installed for the scenario's GPU.
  std::string kernels_folder(const std::optional<PlanDocument>& doc) const;
  // With a plan: its cost overrides, then --cost-param; --profile, or else the profile the plan was made
  // with (BadInput telling to pass --profile again when it is gone or changed); --calibration on top.
  CostModelChain cost_models(const Model& model, const std::optional<PlanDocument>& doc,
                             const AnalyticCostParams& defaults = {}) const;
};

// load(value), its errors (which name the input) with the option the user typed in front.
template <typename Loader>
auto load_for_option(const char* option, const std::string& value, Loader load) {
  try {
    return load(value);
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", option, e.what()));
  }
}

// --flash-attention (the default) and --no-flash-attention, the same on every command with a workload.
void add_flash_attention_flag(CLI::App& cmd, bool& flash_attention);
// --activation-func-fp8-input-store (Workload::activation_fp8_input_store).
void add_activation_fp8_input_store_flag(CLI::App& cmd, bool& store);
// --precision bf16|fp8.
CLI::Option* add_precision_option(CLI::App& cmd, std::string& precision);
// --recompute-modules, shared by simulate and plan.
CLI::Option* add_recompute_modules_option(CLI::App& cmd, std::string& modules);

// "a,,b" -> {"a", "", "b"}: a comma-separated option's items, empty ones kept (the caller names them).
std::vector<std::string> split_commas(const std::string& text);

// "24,24,24,24" -> {24, 24, 24, 24}; BadInput naming --split otherwise.
std::vector<int> parse_split(const std::string& text);

}  // namespace pw
