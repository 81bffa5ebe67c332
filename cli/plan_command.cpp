// `pipewright plan`: the best configurations for a model, a cluster, a GPU count and a global batch,
// found by the configuration search (planner/search.hpp), as a table, JSON, a plan file or exports.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/cost_model_chain.hpp"
#include "cli/explain_output.hpp"
#include "cli/failure_options.hpp"
#include "cli/failure_output.hpp"
#include "cli/memory_headroom_option.hpp"
#include "cli/output_path.hpp"
#include "cli/plan_table.hpp"
#include "cli/spare_nodes_output.hpp"
#include "cli/scenario_options.hpp"
#include "cli/train_cost_options.hpp"
#include "cli/work_bounds.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/failed_nodes.hpp"
#include "core/file_caps.hpp"
#include "core/output_file.hpp"
#include "core/stage_costs.hpp"
#include "core/units.hpp"
#include "kernels/installed_tables.hpp"
#include "exports/exports.hpp"
#include "exports/target_cost.hpp"
#include "planner/failure_report.hpp"
#include "planner/parallel_for.hpp"
#include "planner/spare_templates.hpp"
#include "planner/plan_file.hpp"
#include "planner/progress.hpp"
#include "planner/search.hpp"
#include "planner/search_estimate.hpp"
#include "schedules/generators.hpp"

namespace pw {
namespace {

struct PlanOptions {
  std::string model, cluster;
  int gpus = 0;
  int global_batch_size = 0;
  int seq_len = 0;
  std::string schedules;  // comma-separated
  std::optional<int> tp, cp, pp, dp, vpp, micro_batch_size, max_tp, max_cp, ep, etp, max_ep, max_pp;
  int min_layers_per_stage = kMinBlocksPerRank;
  std::string precisions;  // comma-separated
  std::string zeros;       // comma-separated
  std::string schedule, recompute, rank_order;
  std::string recompute_modules;  // comma-separated; empty: core_attn
  std::string calibration;
  std::string kernels;
  std::string memory_headroom;  // "5%"; empty: the cluster's
  int top = 5;
  int threads = 0;
  bool json = false;
  bool stats = false;
  bool explain = false;
  std::string out_path;
  std::string export_target;
  std::string export_dir = ".";
  bool no_sequence_parallel = false;
  bool flash_attention = true;
  bool activation_fp8_input_store = false;
  std::string precision = "bf16";
  CLI::Option* precision_option = nullptr;
  DpOptions dp_options;
  MoeOptions moe_options;
  TrainCostOptions train_cost;
  FailureOptions failure;
  std::vector<std::string> cost_params;
  std::string profile;
  bool allow_large = false;
  bool force_profile = false;
};

// "none, selective or full".
std::string choices_text(const std::vector<Recompute>& modes) {
  std::string out;
  for (size_t i = 0; i < modes.size(); ++i)
    out += (i == 0 ? "" : i + 1 == modes.size() ? " or " : ", ") + std::string(to_string(modes[i]));
  return out;
}

// --schedules / --schedule / --recompute / --rank-order / --cp / --precisions narrowed to what the export target
// runs; BadInput when the user asked for something it cannot run.
void restrict_to_target(ExportTarget target, SearchSpace& space) {
  const std::vector<std::string> runs = export_schedules(target);
  if (space.schedules.empty()) {
    space.schedules = runs;
  } else {
    for (const std::string& s : space.schedules)
      if (std::find(runs.begin(), runs.end(), s) == runs.end())
        throw_bad_input("--export {}: it cannot run schedule {}; use --schedules {}", to_string(target), s,
                        fmt::format("{}", fmt::join(runs, ",")));
  }
  const std::vector<Recompute> rc = export_recomputes(target);
  if (space.recomputes.empty()) {
    space.recomputes = rc;
  } else {
    for (Recompute r : space.recomputes)
      if (std::find(rc.begin(), rc.end(), r) == rc.end())
        throw_bad_input("--export {}: it has no {} recompute; use --recompute {}", to_string(target), to_string(r),
                        choices_text(rc));
  }
  if (!export_runs_cp(target) && !space.cp) space.cp = 1;
  space.min_zero_with_cp = export_min_zero_with_cp(target);
  const std::vector<Precision> runs_precisions = export_precisions(target);
  for (Precision p : space.precisions)
    if (std::find(runs_precisions.begin(), runs_precisions.end(), p) == runs_precisions.end())
      throw_bad_input("--precisions: --export {} does not run {} as pipewright simulates it; leave it out",
                      to_string(target), to_string(p));
  if (const std::optional<RankOrder> fixed = export_rank_order(target)) {
    if (space.order && *space.order != *fixed)
      throw_bad_input("--export {}: it places ranks {}, not {}; use --rank-order {}", to_string(target), to_string(*fixed),
                      to_string(*space.order), to_string(*fixed));
    space.order = fixed;
  }
}

// --out and the files --export would write into --export-dir.
std::vector<OptionPath> output_paths(const PlanOptions& o, const std::optional<ExportTarget>& target) {
  std::vector<OptionPath> out{{"--out", o.out_path}};
  if (target)
    for (const std::string& name : export_file_names(*target))
      out.push_back({"--export-dir", (std::filesystem::path(o.export_dir) / name).string()});
  return out;
}

// What the spare-node templates keep of plan 1, in words.
std::string template_fixes(const Candidate& best) {
  return fmt::format("tp={}{}{}", best.tp, best.cp > 1 ? fmt::format(", cp={}", best.cp) : "",
                     best.ep > 1 ? fmt::format(", ep={}", best.ep) : "");
}

void run_plan(const PlanOptions& o, std::ostream& out) {
  // Validate what does not need the model first, so that typos fail fast.
  std::optional<ExportTarget> target;
  if (!o.export_target.empty()) target = export_target_from_string(o.export_target);
  check_outputs(output_paths(o, target), {{"--model", o.model}, {"--cluster", o.cluster}, {"--profile", o.profile},
                                          {"--calibration", o.calibration}, {"--kernels", o.kernels}});
  check_top(o.top);
  if (o.threads < 0) throw_bad_input("--threads: must be 0 (all cores) or more, got {}", o.threads);
  if (o.gpus < 1) throw_bad_input("--gpus: must be at least 1, got {}", o.gpus);
  if (o.global_batch_size < 1) throw_bad_input("--global-batch-size: must be at least 1, got {}", o.global_batch_size);
  if (o.seq_len < 0) throw_bad_input("--seq-len: must be positive, got {}", o.seq_len);
  if (o.max_tp && *o.max_tp < 1) throw_bad_input("--max-tp: must be at least 1, got {}", *o.max_tp);
  if (o.max_cp && *o.max_cp < 1) throw_bad_input("--max-cp: must be at least 1, got {}", *o.max_cp);
  if (o.max_ep && *o.max_ep < 1) throw_bad_input("--max-ep: must be at least 1, got {}", *o.max_ep);
  if (o.max_pp && *o.max_pp < 1) throw_bad_input("--max-pp: must be at least 1, got {}", *o.max_pp);
  if (o.min_layers_per_stage < 1 || o.min_layers_per_stage > kMaxLayers)
    throw_bad_input("--min-layers-per-stage: must be from 1 to {}, got {}", kMaxLayers, o.min_layers_per_stage);
  for (const auto& [name, value] : {std::pair{"--tp", o.tp}, {"--cp", o.cp}, {"--ep", o.ep}, {"--etp", o.etp},
                                    {"--pp", o.pp}, {"--dp", o.dp},
                                    {"--vpp", o.vpp}, {"--micro-batch-size", o.micro_batch_size}})
    if (value && *value < 1) throw_bad_input("{}: must be at least 1, got {}", name, *value);

  SearchSpace space;
  space.gpus = o.gpus;
  space.tp = o.tp;
  space.cp = o.cp;
  space.max_cp = o.max_cp.value_or(0);
  space.ep = o.ep;
  space.etp = o.etp;
  space.max_ep = o.max_ep.value_or(0);
  space.pp = o.pp;
  space.max_pp = o.max_pp.value_or(0);
  // A pipeline depth given outright is the user's: the average-depth floor only trims the search.
  if (!o.pp) space.min_blocks_per_rank = o.min_layers_per_stage;
  space.dp = o.dp;
  space.vpp = o.vpp;
  space.micro_batch_size = o.micro_batch_size;
  space.max_tp = o.max_tp.value_or(0);
  if (!o.schedule.empty() && !o.schedules.empty())
    throw_bad_input("--schedule: fixes one schedule and --schedules lists several; give one of them");
  const std::string listed = !o.schedule.empty() ? o.schedule : o.schedules;
  for (const std::string& s : listed.empty() ? std::vector<std::string>{} : split_commas(listed)) {
    if (s.empty()) throw_bad_input("--schedules: an empty name; list schedules such as 1f1b,interleaved");
    chunks_per_rank(s, 1);  // BadInput listing the known schedules
    if (std::find(space.schedules.begin(), space.schedules.end(), s) == space.schedules.end()) space.schedules.push_back(s);
  }
  if (!o.recompute.empty()) space.recomputes = {recompute_from_string(o.recompute.c_str())};
  if (!o.rank_order.empty()) space.order = rank_order_from_string(o.rank_order);
  if (!o.precisions.empty()) {
    if (o.precision_option->count() > 0)
      throw_bad_input("--precisions: --precision fixes one and --precisions lists several; give one of them");
    for (const std::string& p : split_commas(o.precisions)) {
      const Precision x = precision_from_string(p);
      if (std::find(space.precisions.begin(), space.precisions.end(), x) == space.precisions.end()) space.precisions.push_back(x);
    }
  }
  SearchSpace open = space;  // before the export target narrows it: what the narrowing costs
  if (target) restrict_to_target(*target, space);
  if (!o.recompute_modules.empty()) {
    const std::vector<Recompute>& rc = space.recomputes;
    const bool selective = rc.empty() || std::find(rc.begin(), rc.end(), Recompute::Selective) != rc.end() ||
                           std::find(rc.begin(), rc.end(), Recompute::PerStage) != rc.end();
    if (!selective && o.recompute.empty())
      throw_bad_input("--recompute-modules: --export {} has no selective recomputation for the modules to rerun; leave "
                      "--recompute-modules out",
                      to_string(*target));
    if (!selective)
      throw_bad_input("--recompute-modules: the modules are what selective recomputation reruns, which --recompute {} "
                      "leaves out; plan with --recompute selective or without --recompute",
                      choices_text(space.recomputes));
  }

  CostModelChain chain(o.cost_params);

  Scenario base;
  base.model = load_for_option("--model", o.model, load_model);
  base.cluster = load_for_option("--cluster", o.cluster, load_cluster);
  apply_memory_headroom(o.memory_headroom, base.cluster);
  if (target) restrict_experts(*target, base.model, space);
  chain.add_kernels(resolve_kernels_option(o.kernels, base.cluster.gpu));
  if (!o.profile.empty()) chain.add_profile_file(o.profile, base.model, "--profile", o.force_profile);
  add_calibration(chain, o.calibration);
  // A profile's numbers and the analytic model's are not comparable: without a calibration to extrapolate,
  // the search keeps to what the profile measured: one device (tp 1) and its micro-batch sizes.
  const bool measured_only = chain.profiled() && o.calibration.empty() && base.model.transformer;
  if (measured_only && !o.tp && !o.max_tp) space.tp = 1;
  if (measured_only && !o.micro_batch_size) {
    for (const LayerProfile& l : chain.profiled()->profile().layers)
      if (std::find(space.micro_batch_sizes.begin(), space.micro_batch_sizes.end(), l.micro_batch_size) ==
          space.micro_batch_sizes.end())
        space.micro_batch_sizes.push_back(l.micro_batch_size);
    std::sort(space.micro_batch_sizes.begin(), space.micro_batch_sizes.end());
  }
  const CostModel& cost = chain.model();
  base.global_batch_size = o.global_batch_size;
  base.workload.seq_len = o.seq_len;
  base.workload.sequence_parallel = !o.no_sequence_parallel;
  base.workload.flash_attention = o.flash_attention;
  base.workload.activation_fp8_input_store = o.activation_fp8_input_store;
  base.workload.precision = precision_from_string(o.precision);
  if (std::find(space.precisions.begin(), space.precisions.end(), Precision::Fp8) != space.precisions.end())
    check_fp8_supported(base.cluster, "--precisions", "leave fp8 out, or plan on GPUs that have it (H100, H200, B200)");
  if (space.precisions.empty() && base.workload.precision == Precision::Fp8)
    check_fp8_supported(base.cluster, "--precision", "plan with bf16, or on GPUs that have it (H100, H200, B200)");
  if (!o.recompute_modules.empty()) base.workload.recompute_modules = recompute_modules_from_string(o.recompute_modules);
  o.dp_options.apply(base.parallel);
  // Every candidate's stages hold at most the model: refused here once rather than in the middle of the search.
  if (base.parallel.bucket_parameters > 0)
    check_grad_buckets(parameter_count(base.model), base.parallel.bucket_parameters);
  o.moe_options.apply(base.workload);
  // PyTorch groups an interleaved schedule's micro-batches its own way when m is not a multiple of pp.
  if (target == ExportTarget::Torchtitan && base.group_size == 0) base.group_size = kPyTorchGroupSize;
  // torchtitan replicates the whole state or shards all of it: without a level given, plan both (the
  // lower where it fits) rather than Megatron's default ZeRO-1, which it cannot run.
  if (target == ExportTarget::Torchtitan && !o.dp_options.zero_given() && o.zeros.empty())
    space.zeros = {0, 3};
  else if (target)
    check_zero_level(*target, base.parallel.zero);
  if (target) check_state_widths(*target, base.parallel);
  if (target) check_activation_storage(*target, base.workload);
  // DeepSpeed's pipeline engine reduces after the last backward: plan it so, unless the user asked
  // otherwise (then the export says why it cannot).
  if (target == ExportTarget::DeepSpeed && !o.dp_options.overlap_given()) base.parallel.overlap_grad_reduce = false;
  // --zeros: each plan takes the lowest of these levels that fits.
  if (!o.zeros.empty()) {
    if (o.dp_options.zero_given())
      throw_bad_input("--zeros: --zero (or --[no-]distributed-optimizer) fixes one level and --zeros lists several; give "
                      "one of them");
    for (const std::string& z : split_commas(o.zeros)) {
      if (z != "0" && z != "1" && z != "2" && z != "3") throw_bad_input("--zeros: '{}' is not a ZeRO level; list 0, 1, 2 or 3", z);
      const int level = z[0] - '0';
      if (target) check_zero_level(*target, level);
      if (std::find(space.zeros.begin(), space.zeros.end(), level) == space.zeros.end()) space.zeros.push_back(level);
    }
    std::sort(space.zeros.begin(), space.zeros.end());
    if (base.parallel.optimizer_precision.precision_aware && space.zeros.front() == 0)
      throw_bad_input("--zeros: ZeRO-0 has no distributed optimizer, which --precision-aware-optimizer needs; list "
                      "levels from 1");
  }
  if (space.zeros.empty()) check_optimizer_precision(base.parallel);
  o.dp_options.check_grad_sync_levels(space.zeros.empty() ? std::vector<int>{base.parallel.zero} : space.zeros);

  std::optional<TrainingRunSpec> train;
  o.train_cost.check_given_with_tokens();
  if (o.train_cost.asked()) train = o.train_cost.spec(o.gpus);
  std::optional<LostGpus> lost;
  if (o.failure.asked()) lost = lost_gpus(o.failure.fail, o.gpus, base.cluster);
  const double batch_tolerance = batch_tolerance_of(o.failure.batch_tolerance);
  if (!o.failure.asked() && !o.failure.batch_tolerance.empty())
    throw_bad_input("--batch-tolerance: it weighs the ways on after a failure; give --fail too (e.g. --fail 1node)");
  SparePool pool;
  if (o.train_cost.spares) {
    if (base.cluster.ideal) throw_bad_input("--spares: cluster '{}' is ideal and has no nodes to hold back", base.cluster.name);
    pool.gpus_per_node = base.cluster.gpus_per_node;
    pool.run_nodes = (o.gpus + pool.gpus_per_node - 1) / pool.gpus_per_node;
    pool.mtbf_per_gpu_s = o.train_cost.mtbf_per_gpu_hours * 3600;
    pool.repair_s = o.train_cost.repair_hours * 3600;
    o.train_cost.check_spares(pool.run_nodes);
  }

  std::vector<WorkEstimate> work = search_space_estimate(base, space, thread_count(o.threads));
  if (target)  // the search without the target's limits, top 1
    for (const WorkEstimate& part : search_space_estimate(base, open, thread_count(o.threads))) work.push_back(part);
  check_work_unless_allowed("plan", work, o.allow_large);
  ProgressBar bar(std::cerr, stderr_is_terminal());
  SearchOptions so;
  so.top = o.top;
  so.threads = o.threads;
  so.time_limit_s = o.allow_large ? 0 : kWorkSecondsLimit;
  so.progress = [&bar](long done, long total) { bar.update(done, total); };
  const SearchResult result = search_plans(base, space, cost, so);
  bar.finish();
  const std::vector<SplitComparison> cmp = compare_splits(result.plans, cost, o.threads);
  std::optional<TargetCost> narrowed;
  if (target) {
    SearchOptions quiet = so;
    quiet.progress = nullptr;
    narrowed = target_cost(*target, base, open, result.plans.front(), cost, quiet);
  }
  std::optional<PlanExplanation> explanation;
  if (o.explain) explanation = explain_plans(result.plans, cost, result.fastest, so.prefer_within);

  // Which layers of the plans shown the profile timed, per micro-batch shape.
  std::vector<Workload> shown;
  for (const Plan& p : result.plans) shown.push_back(p.evaluation.scenario.workload);
  nlohmann::ordered_json j_out;
  if (o.json) {
    nlohmann::ordered_json& j = j_out;
    j = plans_json(base, o.gpus, result, cmp);
    if (train)
      for (size_t i = 0; i < result.plans.size(); ++i)
        j["plans"][i]["training_run"] =
            train_cost_json(training_run_cost(*train, result.plans[i].evaluation.metrics.throughput_tokens_per_s));
    if (explanation) j["explain"] = explanation_json(*explanation);
    if (narrowed) {
      nlohmann::ordered_json limit = {{"target", to_string(*target)}};
      if (narrowed->outside) {
        limit["fastest_outside"] = describe(narrowed->outside->config);
        limit["step_time_s"] = narrowed->outside->evaluation.metrics.step_time_s;
        limit["gain"] = narrowed->gain;
        limit["why"] = narrowed->why;
      }
      j["export_limit"] = limit;
    }
    j["cost_model"] = chain.to_json(base.model, shown);
  } else {
    print_table(out, base, o.gpus, result, cmp);
    if (train) {
      std::vector<double> rates;
      for (const Plan& p : result.plans) rates.push_back(p.evaluation.metrics.throughput_tokens_per_s);
      print_train_costs(out, o.train_cost, *train, rates);
    }
    if (explanation) print_explanation(out, *explanation);
    if (narrowed) out << "\n" << target_cost_text(*target, *narrowed) << "\n";
    if (chain.tables() && !chain.profiled()) {
      out << fmt::format("\ncost model: {}\n", chain.description());
      for (const std::string& line : chain.table_lines()) out << "  while searching: " << line << "\n";
    }
    if (chain.profiled()) {
      out << fmt::format("\ncost model: {}\n", chain.description());
      for (const std::string& line : chain.table_lines()) out << "  while searching: " << line << "\n";
      if (!space.micro_batch_sizes.empty())
        out << fmt::format("  searched what the profile measured: tp {}, micro-batch sizes {}\n",
                           space.tp ? std::to_string(*space.tp) : "any", fmt::join(space.micro_batch_sizes, ", "));
      for (const std::string& line : chain.coverage_lines(base.model, shown)) out << "  " << line << "\n";
    }
  }
  if (lost) {
    Scenario left = base;
    if (lost->nodes > 0 && !base.cluster.ideal) {
      const int per = base.cluster.gpus_per_node;
      left.cluster = without_last_nodes(base.cluster, (o.gpus + per - 1) / per, lost->nodes);
    }
    SearchOptions quiet = so;
    quiet.progress = nullptr;
    const AfterFailure after = replan(left, space, lost->left, cost, quiet, result.plans.front(), o.gpus, batch_tolerance);
    const int count = lost->nodes > 0 ? lost->nodes : lost->gpus;
    const std::string heading = fmt::format("if {} {}, {} GPUs are left", lost->what, count == 1 ? "fails" : "fail", lost->left);
    if (o.json) {
      j_out["failure"] = after_failure_json(after, cost, o.threads);
      j_out["failure"]["lost"] = lost->what;
      j_out["failure"]["lost_gpus"] = lost->gpus;
    } else {
      print_after_failure(out, heading, after, cost, o.threads);
    }
  }
  if (train && o.train_cost.spares) {
    SearchOptions quiet = so;
    quiet.progress = nullptr;
    quiet.top = 1;
    const Plan& best = result.plans.front();
    const std::vector<SpareTemplate> templates =
        spare_templates(base, space, pool, templates_needed(pool), o.gpus, cost, quiet, best);
    const std::vector<SpareRow> rows = spare_rows(pool, *o.train_cost.spares, templates, *train);
    if (o.json) j_out["spares"] = spare_json(pool, templates, rows);
    else print_spare_table(out, pool, *train, template_fixes(best.config), templates, rows);
  }
  if (o.json) out << j_out.dump(2) << "\n";
  if (o.stats)
    out << fmt::format("\nsearch: {} configurations, {} over memory by the first bound, {} invalid, {} over memory by the "
                       "schedule's bounds, the partitioner or the simulator, {} dropped by step-time bounds, {} per-stage recompute "
                       "the same as a uniform one, {} simulated, {:.2f} s\n",
                       result.stats.candidates, result.stats.memory_pruned, result.stats.invalid, result.stats.over_memory,
                       result.stats.bound_pruned, result.stats.same_as_uniform, result.stats.simulated,
                       result.stats.seconds);

  const Evaluation& best = result.plans.front().evaluation;
  std::vector<OutputText> written;
  if (!o.out_path.empty()) {
    PlanExtras extras;
    extras.cost_overrides = o.cost_params;
    if (const std::optional<ProfileOrigin>& origin = chain.profile_origin())
      extras.profile = PlanProfile{origin->path, origin->tool, origin->machine};
    extras.baselines = {{"uniform", gain_json(best, cmp.front().uniform)},
                        {"parameters", gain_json(best, cmp.front().parameters)}};
    written.push_back({o.out_path, plan_to_json_text(best, extras)});
  }
  if (target)
    for (const ExportFile& f : export_plan(*target, best, o.export_dir))
      written.push_back({(std::filesystem::path(o.export_dir) / f.name).string(), f.text});
  // The plan and its launch files are one set: all of them on the disk, or none.
  write_output_files(written);
  if (o.json) return;
  for (size_t i = 0; i < written.size(); ++i) {
    if (i == 0 && !o.out_path.empty())
      out << fmt::format("\nwrote plan 1 to {}\n", o.out_path);
    else
      out << fmt::format("\n--- {} ---\n{}", written[i].path, written[i].text);
  }
}

}  // namespace

CommandRunner add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Find the fastest configurations that fit: degrees, batch, schedule, recompute, split");
  auto o = std::make_shared<PlanOptions>();
  cmd->add_option("--model", o->model, "Model preset (see `pipewright models`), Hugging Face config.json or pipewright model JSON")
      ->required();
  cmd->add_option("--cluster", o->cluster, "Cluster preset (see `pipewright clusters`) or cluster JSON")->required();
  cmd->add_option("--gpus", o->gpus, "GPUs to use: tp x cp x pp x dp")->required();
  cmd->add_option("--global-batch-size", o->global_batch_size, "Sequences per iteration over all replicas")->required();
  cmd->add_option("--seq-len", o->seq_len, "Sequence length (default: the model's)");
  cmd->add_option("--schedules", o->schedules, "Schedules to search, comma-separated (default: all but dualpipe, whose second copy of the model costs search time)");
  cmd->add_option("--max-tp", o->max_tp, "Largest tensor-parallel degree to search (default: the GPUs of a node)");
  cmd->add_option("--top", o->top, "Plans to print")->capture_default_str();
  o->train_cost.add_to(*cmd);
  o->failure.add_to(*cmd);
  cmd->add_option("--threads", o->threads, "Threads for the search (default: all cores)");
  cmd->add_flag("--json", o->json, "Print JSON instead of the table");
  cmd->add_option("--out", o->out_path, "Write the best plan to this file (docs/plan-format.md)");
  cmd->add_option("--export", o->export_target, "Export the best plan: megatron, deepspeed or torchtitan");
  cmd->add_option("--export-dir", o->export_dir, "Folder for the exported files")->capture_default_str();
  cmd->add_option("--tp", o->tp, "Fix the tensor-parallel degree");
  cmd->add_option("--cp", o->cp, "Fix the context-parallel degree (default: searched for long sequences)");
  cmd->add_option("--max-cp", o->max_cp, "Largest context-parallel degree to search");
  cmd->add_option("--ep", o->ep, "Fix the expert-parallel degree (MoE models; default: searched)");
  cmd->add_option("--etp", o->etp, "Fix the expert tensor-parallel degree (default: 1 and tp searched)");
  cmd->add_option("--max-ep", o->max_ep, "Largest expert-parallel degree to search");
  cmd->add_option("--precisions", o->precisions, "Precisions to search, comma-separated: bf16,fp8 (default: --precision's)");
  cmd->add_option("--zeros", o->zeros,
                  "ZeRO levels to search, comma-separated, e.g. 1,2,3: each plan takes the lowest that fits (default: "
                  "--zero's, 1)");
  cmd->add_option("--pp", o->pp, "Fix the pipeline-parallel degree");
  cmd->add_option("--max-pp", o->max_pp, "Deepest pipeline to search (default: no limit)");
  cmd->add_option("--min-layers-per-stage", o->min_layers_per_stage,
                  "Search only pipelines that give each rank at least this many transformer layers on average (the "
                  "deepest published pipelines hold 2)")
      ->capture_default_str();
  cmd->add_option("--dp", o->dp, "Fix the data-parallel degree");
  cmd->add_option("--vpp", o->vpp, "Fix the model chunks per pipeline rank");
  cmd->add_option("--micro-batch-size", o->micro_batch_size, "Fix the micro-batch size");
  cmd->add_option("--schedule", o->schedule, "Fix the schedule");
  cmd->add_option("--recompute", o->recompute, "Fix the recompute mode: none, selective, full or per-stage");
  add_recompute_modules_option(*cmd, o->recompute_modules);
  cmd->add_option("--rank-order", o->rank_order, "Fix where ranks sit: tp-pp-dp or tp-dp-pp (tp innermost)");
  cmd->add_flag("--no-sequence-parallel", o->no_sequence_parallel, "Turn off sequence parallelism");
  add_flash_attention_flag(*cmd, o->flash_attention);
  add_activation_fp8_input_store_flag(*cmd, o->activation_fp8_input_store);
  o->precision_option = add_precision_option(*cmd, o->precision);
  o->dp_options.add_to(*cmd);
  o->moe_options.add_to(*cmd);
  add_memory_headroom_option(*cmd, o->memory_headroom);
  cmd->add_option("--cost-param", o->cost_params, "Override a cost-model parameter, NAME=VALUE; repeatable");
  cmd->add_option("--profile", o->profile,
                  "Profile JSON from `pipewright profile`: measured layer times, link and optimizer replace the analytic "
                  "ones where present (other micro-batch sizes: analytic)");
  add_force_profile_option(*cmd, o->force_profile);
  add_calibration_option(*cmd, o->calibration);
  add_kernels_option(*cmd, o->kernels);
  add_allow_large_flag(*cmd, o->allow_large);
  cmd->add_flag("--explain", o->explain,
                "Break the best plan's step down, name what binds it and what each runner-up loses");
  cmd->add_flag("--stats", o->stats, "Print how many configurations the bounds dropped and how many were simulated");
  return [o](std::ostream& out) { run_plan(*o, out); };
}

}  // namespace pw
