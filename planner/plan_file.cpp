#include "planner/plan_file.hpp"

#include <cmath>
#include <limits>
#include <string_view>

#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/excerpt.hpp"
#include "core/json_text.hpp"
#include "core/version.hpp"
#include "planner/placement.hpp"
#include "schedules/generators.hpp"
#include "sim/evaluation_json.hpp"

namespace pw {
namespace {

constexpr const char* kFormat = "pipewright-plan";
constexpr int kPlanVersion = 1;

using ojson = nlohmann::ordered_json;

ojson predicted_json(const Evaluation& ev) {
  ojson ranks = ojson::array();
  for (const RankStats& r : ev.sim.ranks) ranks.push_back(rank_stats_json(r));
  ojson out = metrics_json(ev.metrics);
  out["ranks"] = ranks;
  return out;
}

std::vector<LayerRange> read_stages(const JsonFields& f, const std::string& key) {
  const nlohmann::json& v = f.required(key);
  if (!v.is_array() || v.empty()) f.fail(key, "must be a non-empty list of stages");
  f.array(key, kMaxScheduleStages, "stages");
  std::vector<LayerRange> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_object()) f.fail(key, fmt::format("entry {} must be an object", i));
    JsonFields s(v[i], f.source(), f.name(key) + fmt::format("[{}].", i));
    const nlohmann::json& layers = s.required("layers");
    const auto index = [](const nlohmann::json& x) {
      return x.is_number_integer() && x.get<long long>() >= 0 && x.get<long long>() < kMaxModelLayers;
    };
    if (!layers.is_array() || layers.size() != 2 || !index(layers[0]) || !index(layers[1]))
      s.fail("layers", fmt::format("must be [first, last] layer indices, got {}", json_excerpt(layers)));
    out.push_back(LayerRange{layers[0].get<int>(), layers[1].get<int>()});
  }
  return out;
}

}  // namespace

std::string plan_to_json_text(const Evaluation& ev, const PlanExtras& extras) {
  const Scenario& s = ev.scenario;
  const ParallelConfig& pc = s.parallel;
  ojson stages = ojson::array();
  for (const StageReport& st : ev.stages)
    stages.push_back({{"stage", st.stage},
                      {"rank", st.rank},
                      {"layers", {st.layers.first, st.layers.last}},
                      {"first_layer", s.model.layers[static_cast<size_t>(st.layers.first)].name},
                      {"last_layer", s.model.layers[static_cast<size_t>(st.layers.last)].name}});
  ojson gpus = ojson::array();
  for (const GpuPlace& p : place_ranks(pc, s.cluster, pc.order))
    gpus.push_back({{"rank", p.global_rank}, {"node", p.node}, {"gpu", p.local_gpu}, {"tp", p.tp_idx}, {"cp", p.cp_idx},
                    {"pp", p.pp_idx}, {"dp", p.dp_idx}, {"ep", p.ep_idx}, {"etp", p.etp_idx},
                    {"expert_dp", p.expert_dp_idx}});

  ojson j;
  j["format"] = kFormat;
  j["version"] = kPlanVersion;
  j["pipewright_version"] = kVersion;
  j["model"] = ojson::parse(model_to_json_text(s.model));
  j["cluster"] = ojson::parse(cluster_to_json_text(s.cluster));
  j["gpus"] = pc.gpus();
  j["parallel"] = {{"tp", pc.tp},
                   {"cp", pc.cp},
                   {"ep", pc.ep},
                   {"etp", pc.etp},
                   {"pp", pc.pp},
                   {"dp", pc.dp},
                   {"vpp", pc.vpp},
                   {"microbatches", pc.microbatches},
                   {"distributed_optimizer", pc.distributed_optimizer()},
                   {"zero", pc.zero},
                   {"dp_shard", pc.dp_shard},
                   {"reshard_after_forward", to_string(pc.reshard_after_forward)},
                   {"fsdp_grad_sync", to_string(pc.fsdp_grad_sync)},
                   {"overlap_grad_reduce", pc.overlap_grad_reduce},
                   {"overlap_param_gather", pc.overlap_param_gather},
                   {"bucket_parameters", pc.bucket_parameters},
                   {"grad_reduce_in_bf16", pc.grad_reduce_in_bf16},
                   {"precision_aware_optimizer", pc.optimizer_precision.precision_aware},
                   {"exp_avg_dtype", to_string(pc.optimizer_precision.exp_avg)},
                   {"exp_avg_sq_dtype", to_string(pc.optimizer_precision.exp_avg_sq)}};
  j["workload"] = {{"micro_batch_size", s.workload.micro_batch_size},
                   {"seq_len", s.workload.seq_len},
                   {"sequence_parallel", s.workload.sequence_parallel},
                   {"recompute", to_string(s.workload.recompute)},
                   {"recompute_modules", module_names(s.workload.recompute_modules)},
                   {"flash_attention", s.workload.flash_attention},
                   {"activation_fp8_input_store", s.workload.activation_fp8_input_store},
                   {"precision", to_string(s.workload.precision)},
                   {"capacity_factor", s.workload.capacity_factor},
                   {"dispatcher", to_string(s.workload.dispatcher)}};
  if (!s.stage_recompute.empty()) {
    ojson levels = ojson::array();
    for (Recompute r : s.stage_recompute) levels.push_back(to_string(r));
    j["workload"]["stage_recompute"] = levels;
  }
  j["global_batch_size"] = s.global_batch_size;
  j["schedule"] = {{"name", s.schedule},
                   // PyTorch's automatic group is written as the size it comes to.
                   {"group_size", s.group_size != kPyTorchGroupSize ? s.group_size
                                  : s.schedule == "interleaved"      ? interleaved_group_size(s)
                                                                     : 0},
                   {"max_pending", s.max_pending},
                   {"actions", ojson::parse(schedule_to_json_text(ev.schedule))}};
  j["optimizer"] = {{"synchronous", s.synchronous_optimizer}, {"async_iterations", s.async_iterations}};
  // A run's ranks on one CPU machine's cores (`run --json`'s scenario, for calibrate to simulate it again).
  if (s.shared_cores.cores > 0 || s.shared_cores.wakeup_s > 0) {
    j["shared_cores"] = {{"cores", s.shared_cores.cores}, {"wakeup_s", s.shared_cores.wakeup_s}};
    if (s.shared_cores.turns)
      j["shared_cores"].update({{"turns", true}, {"handover_s", s.shared_cores.handover_s}});
  }
  j["split"] = {{"method", extras.split_method}, {"stages", stages}};
  j["placement"] = {{"order", to_string(pc.order)}, {"gpus", gpus}};
  j["cost_model"] = {{"name", extras.profile ? "profiled" : "analytic"}, {"overrides", extras.cost_overrides}};
  if (extras.profile)
    j["cost_model"]["profile"] = {
        {"path", extras.profile->path}, {"tool", extras.profile->tool}, {"machine", extras.profile->machine}};
  j["predicted"] = predicted_json(ev);
  if (!extras.baselines.is_null()) j["baselines"] = extras.baselines;
  return json_file_text(j, "plan");
}

PlanDocument plan_from_json_text(const std::string& text, const std::string& source) {
  const nlohmann::json doc = parse_json_text(text, source);
  if (!doc.is_object()) throw_bad_input("{}: a plan file holds one JSON object, got {}", source, doc.type_name());
  JsonFields f(doc, source);
  const std::string format = f.string("format");
  if (format != kFormat)
    f.fail("format", fmt::format("is \"{}\"; a plan file says \"{}\" (write one with pipewright plan --out)", excerpt(format), kFormat));
  const long version = f.positive_integer("version");
  if (version != kPlanVersion)
    f.fail("version", fmt::format("is {}; this pipewright reads version {} (pipewright {})", version, kPlanVersion, kVersion));
  f.reject_unknown({"format", "version", "pipewright_version", "model", "cluster", "gpus", "parallel", "workload",
                    "global_batch_size", "schedule", "optimizer", "shared_cores", "split", "placement", "cost_model",
                    "predicted", "baselines"});

  PlanDocument out;
  out.pipewright_version = f.optional_string("pipewright_version").value_or("");
  Scenario& s = out.scenario;
  if (!f.required("model").is_object()) f.fail("model", "must be an embedded model object");
  if (!f.required("cluster").is_object()) f.fail("cluster", "must be an embedded cluster object");
  s.model = model_from_json_text(f.required("model").dump(), source + ": model");
  s.cluster = cluster_from_json_text(f.required("cluster").dump(), source + ": cluster");

  const JsonFields p = f.object("parallel");
  s.parallel.tp = p.positive_int("tp");
  if (p.has("cp")) s.parallel.cp = p.positive_int("cp");  // since issue 13; 1 before
  if (p.has("ep")) s.parallel.ep = p.positive_int("ep");  // since issue 14; 1 before
  if (p.has("etp")) s.parallel.etp = p.positive_int("etp");
  s.parallel.pp = p.positive_int("pp");
  s.parallel.dp = p.positive_int("dp");
  s.parallel.vpp = p.positive_int("vpp");
  s.parallel.microbatches = p.positive_int("microbatches");
  // "zero" since issue 13; older plans say only whether the optimizer state was sharded (ZeRO-1).
  s.parallel.zero = p.boolean("distributed_optimizer", true) ? 1 : 0;
  if (p.has("zero")) {
    const double level = p.number("zero");
    if (level != 0 && level != 1 && level != 2 && level != 3) p.fail("zero", fmt::format("is {}; give 0, 1, 2 or 3", level));
    s.parallel.zero = static_cast<int>(level);
  }
  const std::optional<ParallelConfig::Reshard> reshard =
      reshard_from_string(p.optional_string("reshard_after_forward").value_or("default"));
  if (!reshard) p.fail("reshard_after_forward", "must be \"default\", \"always\" or \"never\"");
  s.parallel.reshard_after_forward = *reshard;
  const std::optional<ParallelConfig::GradSync> grad_sync =
      grad_sync_from_string(p.optional_string("fsdp_grad_sync").value_or("default"));
  if (!grad_sync) p.fail("fsdp_grad_sync", "must be \"default\", \"every-microbatch\" or \"last-microbatch\"");
  s.parallel.fsdp_grad_sync = *grad_sync;
  if (p.has("dp_shard")) s.parallel.dp_shard = static_cast<int>(p.non_negative_integer("dp_shard"));
  s.parallel.overlap_grad_reduce = p.boolean("overlap_grad_reduce", true);
  s.parallel.overlap_param_gather = p.boolean("overlap_param_gather", true);
  s.parallel.bucket_parameters = p.non_negative_number("bucket_parameters", 0.0);
  s.parallel.grad_reduce_in_bf16 = p.boolean("grad_reduce_in_bf16", false);
  s.parallel.optimizer_precision.precision_aware = p.boolean("precision_aware_optimizer", false);
  for (auto [field, dtype] : {std::pair{"exp_avg_dtype", &s.parallel.optimizer_precision.exp_avg},
                              std::pair{"exp_avg_sq_dtype", &s.parallel.optimizer_precision.exp_avg_sq}}) {
    const std::optional<StateDtype> d = state_dtype_from_string(p.optional_string(field).value_or("fp32"));
    if (!d) p.fail(field, "must be " + state_dtype_choices("\""));
    *dtype = *d;
  }
  const std::optional<std::int64_t> gpus = checked_product({s.parallel.tp, s.parallel.cp, s.parallel.pp, s.parallel.dp});
  if (!gpus || *gpus > std::numeric_limits<int>::max())
    f.fail("parallel", fmt::format("tp x cp x pp x dp = {} x {} x {} x {} is beyond {} GPUs", s.parallel.tp, s.parallel.cp,
                                   s.parallel.pp, s.parallel.dp, std::numeric_limits<int>::max()));
  if (f.positive_integer("gpus") != *gpus)
    f.fail("gpus", fmt::format("is {} but tp x cp x pp x dp = {}", f.positive_integer("gpus"), *gpus));

  const JsonFields w = f.object("workload");
  s.workload.micro_batch_size = w.positive_int("micro_batch_size");
  s.workload.seq_len = w.positive_int("seq_len");
  s.workload.tp = s.parallel.tp;
  s.workload.cp = s.parallel.cp;
  s.workload.ep = s.parallel.ep;
  s.workload.etp = s.parallel.etp;
  s.workload.capacity_factor = w.non_negative_number("capacity_factor", 0.0);
  try {
    s.workload.dispatcher = dispatcher_from_string(w.optional_string("dispatcher").value_or("alltoall"));
  } catch (const Error& e) {
    w.fail("dispatcher", e.what());
  }
  s.workload.sequence_parallel = w.boolean("sequence_parallel", true);
  s.workload.flash_attention = w.boolean("flash_attention", true);
  s.workload.activation_fp8_input_store = w.boolean("activation_fp8_input_store", false);
  s.workload.precision = precision_from_string(w.optional_string("precision").value_or("bf16"));
  const std::string recompute = w.string("recompute");
  try {
    s.workload.recompute = recompute_from_string(recompute.c_str());
  } catch (const Error& e) {
    w.fail("recompute", e.what());
  }
  if (const nlohmann::json* modules = w.find("recompute_modules")) {
    if (!modules->is_array() || modules->empty())
      w.fail("recompute_modules", "must be a list of recompute module names, e.g. [\"core_attn\"]");
    std::string names;
    for (const auto& x : *modules) {
      if (!x.is_string()) w.fail("recompute_modules", "must be a list of recompute module names, e.g. [\"core_attn\"]");
      names += x.get<std::string>() + ",";
    }
    try {
      s.workload.recompute_modules = recompute_modules_from_string(names);
    } catch (const Error& e) {
      const std::string_view why = std::string_view(e.what()).substr(std::string_view("--recompute-modules: ").size());
      w.fail("recompute_modules", fmt::format("lists {}: {}", modules->dump(), why));
    }
  }
  if (const nlohmann::json* levels = w.find("stage_recompute")) {
    if (!levels->is_array()) w.fail("stage_recompute", "must be a list of levels, one per stage");
    for (const auto& x : *levels) {
      const std::string level = x.is_string() ? x.get<std::string>() : "";
      try {
        s.stage_recompute.push_back(recompute_from_string(level.c_str()));
      } catch (const Error& e) {
        w.fail("stage_recompute", e.what());
      }
    }
  }
  if (s.workload.recompute == Recompute::PerStage && s.stage_recompute.empty())
    w.fail("stage_recompute", "is missing: recompute \"per-stage\" needs each stage's level");
  s.global_batch_size = f.positive_int("global_batch_size");
  const std::optional<std::int64_t> batch =
      checked_product({s.parallel.microbatches, s.workload.micro_batch_size, s.parallel.dp});
  if (batch != s.global_batch_size)
    f.fail("global_batch_size",
           batch ? fmt::format("is {} but microbatches x micro_batch_size x dp = {}", s.global_batch_size, *batch)
                 : fmt::format("is {} but microbatches x micro_batch_size x dp = {} x {} x {} is beyond any batch",
                               s.global_batch_size, s.parallel.microbatches, s.workload.micro_batch_size,
                               s.parallel.dp));

  const JsonFields sch = f.object("schedule");
  s.schedule = sch.string("name");
  s.group_size = static_cast<int>(sch.non_negative_integer("group_size"));
  if (sch.has("max_pending")) s.max_pending = static_cast<int>(sch.non_negative_integer("max_pending"));
  out.schedule = schedule_from_json_text(sch.required("actions").dump(), source + ": schedule.actions");
  // The plan's own order is what gets simulated, whatever this version's generators would build.
  s.imported_schedule = out.schedule;
  if (const nlohmann::json* o = f.find("optimizer")) {
    JsonFields opt(*o, source, "optimizer.");
    s.synchronous_optimizer = opt.boolean("synchronous", true);
    if (opt.has("async_iterations")) s.async_iterations = opt.positive_int("async_iterations");
  }

  if (const nlohmann::json* c = f.find("shared_cores")) {
    JsonFields shared(*c, source, "shared_cores.");
    shared.reject_unknown({"cores", "wakeup_s", "turns", "handover_s"});
    s.shared_cores.cores = shared.figure("cores", kCoresRange, 0.0);
    s.shared_cores.wakeup_s = shared.figure("wakeup_s", kSecondsRange, 0.0);
    s.shared_cores.turns = shared.boolean("turns", false);
    s.shared_cores.handover_s = shared.figure("handover_s", kSecondsRange, 0.0);
  }

  if (const nlohmann::json* pl = f.find("placement")) {
    JsonFields place(*pl, source, "placement.");
    if (place.has("order")) {
      try {
        s.parallel.order = rank_order_from_string(place.string("order"));
      } catch (const Error& e) {
        place.fail("order", e.what());
      }
    }
  }
  const JsonFields split = f.object("split");
  out.split_method = split.string("method");
  s.ranges = read_stages(split, "stages");
  // With copies of the model (bidirectional DualPipe) every stage is listed; each copy's stages run the same
  // parts, and the scenario takes one copy's.
  const int copies = out.schedule.copies;
  if (copies > 1 && s.ranges.size() == static_cast<size_t>(out.schedule.num_stages())) {
    const std::vector<LayerRange> parts(s.ranges.begin(), s.ranges.begin() + out.schedule.stages_per_copy());
    for (size_t st = 0; st < s.ranges.size(); ++st) {
      const LayerRange& part = parts[static_cast<size_t>(out.schedule.part_of_stage(static_cast<int>(st)))];
      if (s.ranges[st].first != part.first || s.ranges[st].last != part.last)
        split.fail("stages", fmt::format("stage {} holds layers {}..{}, but the schedule's copies run one split: part {} "
                                         "is layers {}..{}",
                                         st, s.ranges[st].first, s.ranges[st].last, out.schedule.part_of_stage(static_cast<int>(st)),
                                         part.first, part.last));
    }
    s.ranges = parts;
  }

  if (const nlohmann::json* cm = f.find("cost_model")) {
    JsonFields c(*cm, source, "cost_model.");
    const std::string name = c.string("name");
    if (name != "analytic" && name != "profiled")
      c.fail("name", fmt::format("is \"{}\"; this pipewright has the \"analytic\" and \"profiled\" models", excerpt(name)));
    if (const nlohmann::json* pr = c.find("profile")) {
      JsonFields p(*pr, source, "cost_model.profile.");
      p.reject_unknown({"path", "tool", "machine"});
      out.profile = PlanProfile{p.string("path"), p.optional_string("tool").value_or(""),
                                p.optional_string("machine").value_or("")};
    }
    if (name == "profiled" && !out.profile) c.fail("profile", "is missing: a \"profiled\" plan names its profile file");
    if (const nlohmann::json* o = c.find("overrides")) {
      if (!o->is_array()) c.fail("overrides", "must be a list of \"NAME=VALUE\" strings");
      for (const auto& x : *o) {
        if (!x.is_string()) c.fail("overrides", "must be a list of \"NAME=VALUE\" strings");
        out.cost_overrides.push_back(x.get<std::string>());
      }
    }
  }
  if (const nlohmann::json* pr = f.find("predicted")) out.predicted = *pr;
  return out;
}

PlanDocument load_plan(const std::string& path) { return plan_from_json_text(read_text_file(path, "plan"), path); }

}  // namespace pw
