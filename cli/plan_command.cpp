// `pipewright plan`: the best configurations for a model, a cluster, a GPU count and a global batch,
// found by the configuration search (planner/search.hpp), as a table, JSON, a plan file or exports.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "cli/commands.hpp"
#include "cli/cost_model_chain.hpp"
#include "cli/explain_output.hpp"
#include "cli/output_path.hpp"
#include "cli/scenario_options.hpp"
#include "cli/train_cost_options.hpp"
#include "cli/work_bounds.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/units.hpp"
#include "planner/exports.hpp"
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
  std::optional<int> tp, cp, pp, dp, vpp, micro_batch_size, max_tp, max_cp, ep, etp, max_ep;
  std::string precisions;  // comma-separated
  std::string zeros;       // comma-separated
  std::string schedule, recompute, rank_order;
  std::string calibration;
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
  std::string precision = "bf16";
  CLI::Option* precision_option = nullptr;
  DpOptions dp_options;
  MoeOptions moe_options;
  TrainCostOptions train_cost;
  std::vector<std::string> cost_params;
  std::string profile;
  bool allow_large = false;
  bool force_profile = false;
};

// Items with runs of equal neighbours folded: {11, 12, 12, 11} -> "11,12x2,11".
std::string folded_runs(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size();) {
    size_t j = i;
    while (j + 1 < items.size() && items[j + 1] == items[i]) ++j;
    const size_t run = j - i + 1;
    out += (out.empty() ? "" : ",") + (run > 1 ? fmt::format("{}x{}", items[i], run) : items[i]);
    i = j + 1;
  }
  return out;
}

// Transformer blocks per stage with runs folded: "11,12x6,11".
std::string split_text(const Evaluation& ev) {
  std::vector<std::string> blocks;
  for (const StageReport& st : ev.stages) {
    int n = 0;
    for (int i = st.layers.first; i <= st.layers.last; ++i)
      if (ev.scenario.model.layers[static_cast<size_t>(i)].kind == LayerKind::Block ||
          ev.scenario.model.layers[static_cast<size_t>(i)].kind == LayerKind::Explicit)
        ++n;
    blocks.push_back(std::to_string(n));
  }
  return folded_runs(blocks);
}

// Each stage's recompute level with runs folded, as the split: "Fx2,N" (full on two stages, then none);
// the mode's name when the stages do not have levels of their own.
std::string recompute_text(const Evaluation& ev) {
  const std::vector<Recompute>& levels = ev.scenario.stage_recompute;
  if (levels.empty()) return to_string(ev.scenario.workload.recompute);
  std::vector<std::string> letters;
  for (Recompute r : levels) letters.push_back(r == Recompute::Full ? "F" : r == Recompute::Selective ? "S" : "N");
  return folded_runs(letters);
}

// The plan's value of a setting and its twins' where they differ, "tp-pp-dp/tp-dp-pp".
template <typename Name>
std::string with_twins(const Plan& p, const std::string& own, Name name) {
  std::string out = own;
  std::vector<std::string> seen{own};
  for (const Candidate& t : p.twins) {
    const std::string v = name(t);
    if (std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
    seen.push_back(v);
    out += "/" + v;
  }
  return out;
}

std::vector<int> blocks_per_stage(const Evaluation& ev) {
  std::vector<int> out;
  for (const StageReport& st : ev.stages) {
    int n = 0;
    for (int i = st.layers.first; i <= st.layers.last; ++i)
      if (ev.scenario.model.layers[static_cast<size_t>(i)].kind != LayerKind::Embedding &&
          ev.scenario.model.layers[static_cast<size_t>(i)].kind != LayerKind::Head)
        ++n;
    out.push_back(n);
  }
  return out;
}

// What the plan gains over another split of the same configuration: its step time / the plan's - 1.
std::string gain_text(const Evaluation& plan, const Evaluation& other) {
  if (!other.metrics.overflows.empty()) return "OOM";
  return fmt::format("{:+.1f}%", (other.metrics.step_time_s / plan.metrics.step_time_s - 1) * 100);
}

nlohmann::ordered_json gain_json(const Evaluation& plan, const Evaluation& other) {
  return {{"step_time_s", other.metrics.step_time_s},
          {"fits", other.metrics.overflows.empty()},
          {"peak_memory_bytes", other.metrics.peak_memory_bytes},
          {"gain", other.metrics.step_time_s / plan.metrics.step_time_s - 1}};
}

std::string tokens_rate(double t) {
  if (t >= 1e6) return fmt::format("{:.2f} M", t / 1e6);
  if (t >= 1e3) return fmt::format("{:.1f} k", t / 1e3);
  return fmt::format("{:.1f}", t);
}

void print_table(std::ostream& out, const Scenario& base, int gpus, const SearchResult& r,
                 const std::vector<SplitComparison>& cmp) {
  const Scenario& s0 = r.plans.front().evaluation.scenario;
  const double limit = s0.cluster.memory_limit();
  const std::string tokens = s0.workload.seq_len > 1 ? fmt::format(" of {} tokens", s0.workload.seq_len) : "";
  // One precision for all: named in the heading; mixed: the fp8 plans' schedules say so.
  bool mixed = false;
  for (const Plan& p : r.plans) mixed = mixed || p.config.precision != r.plans.front().config.precision;
  out << fmt::format("{} on {}: {} GPUs, global batch {} sequences{}{}\n", base.model.name, base.cluster.name, gpus,
                     base.global_batch_size, tokens,
                     !mixed && r.plans.front().config.precision == Precision::Fp8 ? ", fp8" : "");
  out << fmt::format("searched {} configurations; the {} fastest that fit{}:\n\n", with_commas(r.stats.candidates),
                     r.plans.size(), std::isinf(limit) ? "" : fmt::format(" in {} per GPU", format_bytes(limit)));
  std::vector<std::string> splits, recomputes, orders, schedules;
  size_t split_width = 5, recompute_width = 9, order_width = 8, schedule_width = 11;
  bool per_stage = false;
  for (const Plan& p : r.plans) {
    splits.push_back(split_text(p.evaluation));
    split_width = std::max(split_width, splits.back().size());
    recomputes.push_back(with_twins(p, recompute_text(p.evaluation), [](const Candidate& c) { return std::string(to_string(c.recompute)); }));
    recompute_width = std::max(recompute_width, recomputes.back().size());
    orders.push_back(with_twins(p, to_string(p.evaluation.scenario.parallel.order),
                                [](const Candidate& c) { return std::string(to_string(c.order)); }));
    order_width = std::max(order_width, orders.back().size());
    schedules.push_back(with_twins(p, p.config.schedule, [](const Candidate& c) { return c.schedule; }) +
                        (mixed && p.config.precision == Precision::Fp8 ? " fp8" : ""));
    schedule_width = std::max(schedule_width, schedules.back().size());
    per_stage = per_stage || !p.evaluation.scenario.stage_recompute.empty();
  }
  // ep and etp only for models with routed experts.
  const bool moe = base.model.transformer && base.model.transformer->moe;
  const std::string expert_cells = moe ? "  {:>3}  {:>3}" : "{}{}";
  const std::string row = "{:>3}  {:>2}  {:>2}" + expert_cells +
                          "  {:>3}  {:>4}  {:>4}  {:>3}  {:>3}  {:>5}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>10}  {:>10}  {:>6}  {:>6}  {:>9}  {:>10}  {:>9}\n";
  out << fmt::format(fmt::runtime(row), "#", "tp", "cp", moe ? "ep" : "", moe ? "etp" : "", "pp", "dp", "zero", "vpp", "mbs", "m", "schedule", schedule_width,
                     "recompute",
                     recompute_width, "split", split_width, "order", order_width, "step time", "tokens/s", "MFU", "bubble", "peak mem",
                     "vs uniform", "vs params");
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const Plan& p = r.plans[i];
    const Evaluation& ev = p.evaluation;
    const Metrics& m = ev.metrics;
    out << fmt::format(fmt::runtime(row), i + 1, p.config.tp, p.config.cp, moe ? std::to_string(p.config.ep) : "",
                       moe ? std::to_string(p.config.etp) : "", p.config.pp, p.config.dp, p.config.zero,
                       p.config.vpp, p.config.micro_batch_size, p.config.microbatches,
                       schedules[i], schedule_width,
                       recomputes[i], recompute_width,
                       splits[i], split_width, orders[i], order_width, format_seconds(m.step_time_s), tokens_rate(m.throughput_tokens_per_s),
                       m.model_flops_per_iteration > 0 ? format_percent(m.mfu) : "-", format_percent(m.bubble_fraction),
                       format_bytes(m.peak_memory_bytes), gain_text(ev, cmp[i].uniform), gain_text(ev, cmp[i].parameters));
  }
  out << "\nsplit: transformer layers per stage (per chunk with vpp > 1; NxK: K stages of N), the embedding on the\n"
         "first stage and the head on the last. vs uniform / vs params: how much longer a step takes with the same\n"
         "configuration split evenly by layers (Megatron-LM's default) or by parameters (DeepSpeed's\n"
         "partition_method=\"parameters\"); OOM: that split does not fit. order: where ranks sit, tp innermost;\n"
         "tp-pp-dp keeps pipeline neighbours in a node, tp-dp-pp keeps data-parallel peers (--out lists every GPU).\n"
         "a/b: configurations differing only there gave the same step time and memory, one row for them. cp: GPUs\n"
         "splitting each sequence; zero: the ZeRO level (--zeros: the lowest listed that fits).\n";
  if (moe)
    out << "ep: GPUs the routed experts spread over, folded into each stage's tp x cp x dp GPUs; etp: GPUs splitting\n"
           "each expert.\n";
  if (per_stage)
    out << "recompute per stage: F full, S selective, N none (NxK: K stages), the lightest that fits each stage.\n";
}

std::vector<std::string> stage_recompute_names(const Evaluation& ev) {
  std::vector<std::string> out;
  for (const StageReport& st : ev.stages)
    out.push_back(to_string(ev.scenario.stage_recompute.empty() ? ev.scenario.workload.recompute
                                                                : ev.scenario.stage_recompute[static_cast<size_t>(st.stage)]));
  return out;
}

nlohmann::ordered_json twins_json(const Plan& p) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Candidate& t : p.twins)
    out.push_back({{"schedule", t.schedule}, {"rank_order", to_string(t.order)}, {"recompute", to_string(t.recompute)}});
  return out;
}

nlohmann::ordered_json plans_json(const Scenario& base, int gpus, const SearchResult& r,
                                  const std::vector<SplitComparison>& cmp) {
  nlohmann::ordered_json plans = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const Plan& p = r.plans[i];
    const Evaluation& ev = p.evaluation;
    const Metrics& m = ev.metrics;
    nlohmann::ordered_json ranges = nlohmann::ordered_json::array();
    for (const StageReport& st : ev.stages) ranges.push_back({st.layers.first, st.layers.last});
    plans.push_back({{"tp", p.config.tp},
                     {"cp", p.config.cp},
                     {"ep", p.config.ep},
                     {"etp", p.config.etp},
                     {"pp", p.config.pp},
                     {"dp", p.config.dp},
                     {"zero", p.config.zero},
                     {"precision", to_string(p.config.precision)},
                     {"vpp", p.config.vpp},
                     {"micro_batch_size", p.config.micro_batch_size},
                     {"microbatches", p.config.microbatches},
                     {"schedule", p.config.schedule},
                     {"recompute", to_string(p.config.recompute)},
                     {"stage_recompute", stage_recompute_names(ev)},
                     {"rank_order", to_string(ev.scenario.parallel.order)},
                     {"twins", twins_json(p)},
                     {"split", blocks_per_stage(ev)},
                     {"layer_ranges", ranges},
                     {"step_time_s", m.step_time_s},
                     {"throughput_tokens_per_s", m.throughput_tokens_per_s},
                     {"mfu", m.mfu},
                     {"bubble_fraction", m.bubble_fraction},
                     {"peak_memory_bytes", m.peak_memory_bytes},
                     {"expert_all_to_all_s", m.expert_all_to_all_s},
                     {"vs_uniform", gain_json(ev, cmp[i].uniform)},
                     {"vs_parameters", gain_json(ev, cmp[i].parameters)}});
  }
  return {{"model", base.model.name},
          {"cluster", base.cluster.name},
          {"gpus", gpus},
          {"global_batch_size", base.global_batch_size},
          {"configurations", r.stats.candidates},
          {"plans", plans}};
}

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

void run_plan(const PlanOptions& o, std::ostream& out) {
  // Validate what does not need the model first, so that typos fail fast.
  std::optional<ExportTarget> target;
  if (!o.export_target.empty()) target = export_target_from_string(o.export_target);
  check_outputs(output_paths(o, target), {{"--model", o.model}, {"--cluster", o.cluster}, {"--profile", o.profile},
                                          {"--calibration", o.calibration}});
  if (o.top < 1) throw_bad_input("--top: must be at least 1, got {}", o.top);
  if (o.threads < 0) throw_bad_input("--threads: must be 0 (all cores) or more, got {}", o.threads);
  if (o.gpus < 1) throw_bad_input("--gpus: must be at least 1, got {}", o.gpus);
  if (o.global_batch_size < 1) throw_bad_input("--global-batch-size: must be at least 1, got {}", o.global_batch_size);
  if (o.seq_len < 0) throw_bad_input("--seq-len: must be positive, got {}", o.seq_len);
  if (o.max_tp && *o.max_tp < 1) throw_bad_input("--max-tp: must be at least 1, got {}", *o.max_tp);
  if (o.max_cp && *o.max_cp < 1) throw_bad_input("--max-cp: must be at least 1, got {}", *o.max_cp);
  if (o.max_ep && *o.max_ep < 1) throw_bad_input("--max-ep: must be at least 1, got {}", *o.max_ep);
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
  if (target) restrict_to_target(*target, space);

  CostModelChain chain(o.cost_params);

  Scenario base;
  base.model = load_for_option("--model", o.model, load_model);
  base.cluster = load_for_option("--cluster", o.cluster, load_cluster);
  if (target) restrict_experts(*target, base.model, space);
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
  base.workload.precision = precision_from_string(o.precision);
  o.dp_options.apply(base.parallel);
  o.moe_options.apply(base.workload);
  // PyTorch groups an interleaved schedule's micro-batches its own way when m is not a multiple of pp.
  if (target == ExportTarget::Torchtitan && base.group_size == 0) base.group_size = kPyTorchGroupSize;
  // torchtitan replicates the whole state or shards all of it: without a level given, plan both (the
  // lower where it fits) rather than Megatron's default ZeRO-1, which it cannot run.
  if (target == ExportTarget::Torchtitan && !o.dp_options.zero_given() && o.zeros.empty())
    space.zeros = {0, 3};
  else if (target)
    check_zero_level(*target, base.parallel.zero);
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
  }

  std::optional<TrainingRunSpec> train;
  if (o.train_cost.asked()) train = o.train_cost.spec(o.gpus);

  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  check_work_unless_allowed("plan", {search_estimate(enumerate_candidates(base, space), threads)}, o.allow_large);
  ProgressBar bar(std::cerr, stderr_is_terminal());
  SearchOptions so;
  so.top = o.top;
  so.threads = o.threads;
  so.time_limit_s = o.allow_large ? 0 : kWorkSecondsLimit;
  so.progress = [&bar](long done, long total) { bar.update(done, total); };
  const SearchResult result = search_plans(base, space, cost, so);
  bar.finish();
  const std::vector<SplitComparison> cmp = compare_splits(result.plans, cost, o.threads);
  std::optional<PlanExplanation> explanation;
  if (o.explain) explanation = explain_plans(result.plans, cost);

  // Which layers of the plans shown the profile timed, per micro-batch shape.
  std::vector<Workload> shown;
  for (const Plan& p : result.plans) shown.push_back(p.evaluation.scenario.workload);
  if (o.json) {
    nlohmann::ordered_json j = plans_json(base, o.gpus, result, cmp);
    if (train)
      for (size_t i = 0; i < result.plans.size(); ++i)
        j["plans"][i]["training_run"] =
            train_cost_json(training_run_cost(*train, result.plans[i].evaluation.metrics.throughput_tokens_per_s));
    if (explanation) j["explain"] = explanation_json(*explanation);
    j["cost_model"] = chain.to_json(base.model, shown);
    out << j.dump(2) << "\n";
  } else {
    print_table(out, base, o.gpus, result, cmp);
    if (train) {
      std::vector<double> rates;
      for (const Plan& p : result.plans) rates.push_back(p.evaluation.metrics.throughput_tokens_per_s);
      print_train_costs(out, o.train_cost, *train, rates);
    }
    if (explanation) print_explanation(out, *explanation);
    if (chain.profiled()) {
      out << fmt::format("\ncost model: {}\n", chain.description());
      if (!space.micro_batch_sizes.empty())
        out << fmt::format("  searched what the profile measured: tp {}, micro-batch sizes {}\n",
                           space.tp ? std::to_string(*space.tp) : "any", fmt::join(space.micro_batch_sizes, ", "));
      for (const std::string& line : chain.coverage_lines(base.model, shown)) out << "  " << line << "\n";
    }
  }
  if (o.stats)
    out << fmt::format("\nsearch: {} configurations, {} over memory by the first bound, {} invalid, {} over memory by the "
                       "schedule's bounds, the partitioner or the simulator, {} dropped by step-time bounds, {} per-stage recompute "
                       "the same as a uniform one, {} simulated, {:.2f} s\n",
                       result.stats.candidates, result.stats.memory_pruned, result.stats.invalid, result.stats.over_memory,
                       result.stats.bound_pruned, result.stats.same_as_uniform, result.stats.simulated,
                       result.stats.seconds);

  const Evaluation& best = result.plans.front().evaluation;
  if (!o.out_path.empty()) {
    PlanExtras extras;
    extras.cost_overrides = o.cost_params;
    if (const std::optional<ProfileOrigin>& origin = chain.profile_origin())
      extras.profile = PlanProfile{origin->path, origin->tool, origin->machine};
    extras.baselines = {{"uniform", gain_json(best, cmp.front().uniform)},
                        {"parameters", gain_json(best, cmp.front().parameters)}};
    write_output_file(o.out_path, plan_to_json_text(best, extras));
    if (!o.json) out << fmt::format("\nwrote plan 1 to {}\n", o.out_path);
  }
  if (target) {
    const std::vector<ExportFile> files = export_plan(*target, best, o.export_dir);
    for (const ExportFile& f : files) {
      const std::string path = (std::filesystem::path(o.export_dir) / f.name).string();
      write_output_file(path, f.text);
      if (!o.json) out << fmt::format("\n--- {} ---\n{}", path, f.text);
    }
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
  cmd->add_option("--schedules", o->schedules, "Schedules to search, comma-separated (default: all)");
  cmd->add_option("--max-tp", o->max_tp, "Largest tensor-parallel degree to search (default: the GPUs of a node)");
  cmd->add_option("--top", o->top, "Plans to print")->capture_default_str();
  o->train_cost.add_to(*cmd);
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
  cmd->add_option("--dp", o->dp, "Fix the data-parallel degree");
  cmd->add_option("--vpp", o->vpp, "Fix the model chunks per pipeline rank");
  cmd->add_option("--micro-batch-size", o->micro_batch_size, "Fix the micro-batch size");
  cmd->add_option("--schedule", o->schedule, "Fix the schedule");
  cmd->add_option("--recompute", o->recompute, "Fix the recompute mode: none, selective, full or per-stage");
  cmd->add_option("--rank-order", o->rank_order, "Fix where ranks sit: tp-pp-dp or tp-dp-pp (tp innermost)");
  cmd->add_flag("--no-sequence-parallel", o->no_sequence_parallel, "Turn off sequence parallelism");
  add_flash_attention_flag(*cmd, o->flash_attention);
  o->precision_option = add_precision_option(*cmd, o->precision);
  o->dp_options.add_to(*cmd);
  o->moe_options.add_to(*cmd);
  cmd->add_option("--cost-param", o->cost_params, "Override a cost-model parameter, NAME=VALUE; repeatable");
  cmd->add_option("--profile", o->profile,
                  "Profile JSON from `pipewright profile`: measured layer times, link and optimizer replace the analytic "
                  "ones where present (other micro-batch sizes: analytic)");
  add_force_profile_option(*cmd, o->force_profile);
  add_calibration_option(*cmd, o->calibration);
  add_allow_large_flag(*cmd, o->allow_large);
  cmd->add_flag("--explain", o->explain,
                "Break the best plan's step down, name what binds it and what each runner-up loses");
  cmd->add_flag("--stats", o->stats, "Print how many configurations the bounds dropped and how many were simulated");
  return [o](std::ostream& out) { run_plan(*o, out); };
}

}  // namespace pw
