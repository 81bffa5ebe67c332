#include "cli/cost_model_chain.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "calibrate/calibrated_cost_model.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"

namespace pw {

std::string machine_text(const MachineInfo& m) {
  std::string text = m.backend.empty() ? m.device : fmt::format("{}: {}", m.backend, m.device);
  if (m.cores > 0) text += fmt::format(" ({} cores)", m.cores);
  return text;
}

CostModelChain::CostModelChain(const std::vector<std::string>& cost_params, AnalyticCostParams params)
    : overrides_(cost_params) {
  for (const std::string& assignment : cost_params) set_param(params, assignment);
  models_.push_back(std::make_unique<AnalyticCostModel>(params));
  labels_.push_back(cost_params.empty() ? "analytic" : fmt::format("analytic [{}]", fmt::join(cost_params, ", ")));
}

void CostModelChain::add(const Maker& make, std::string label) {
  models_.push_back(make(*models_.back()));
  labels_.push_back(std::move(label));
}

void CostModelChain::add_profile(Profile profile, const Model& model, ProfileOrigin origin) {
  const std::string source = origin.path.empty() ? fmt::format("measured here in {:.2f} s", origin.measured_s) : origin.path;
  auto profiled = std::make_unique<ProfiledCostModel>(std::move(profile), model, *models_.back());
  profiled_ = profiled.get();
  models_.push_back(std::move(profiled));
  labels_.push_back(fmt::format("profiled ({}: {} on {}{})", source, origin.tool.empty() ? "unknown tool" : origin.tool,
                                origin.machine.empty() ? "an unknown machine" : origin.machine,
                                origin.model_note.empty() ? "" : "; " + origin.model_note));
  origin_ = std::move(origin);
}

namespace {

// How the profile's recorded model compares with `model` (ProfileOrigin::model_note); BadInput when it differs
// and `force` is off.
std::string check_profiled_model(const Profile& profile, const Model& model, const std::string& path,
                                 const std::string& option, bool force) {
  const std::optional<ProfiledModel> ours = profiled_model_of(model);
  if (!ours) return "";  // explicit per-layer costs: the profile times none of them
  if (!profile.model) return "no model recorded, not checked";
  const std::optional<FigureDifference> d = first_difference(*profile.model, *ours);
  if (!d) return "";
  const std::string prefix = option.empty() ? "" : option + ": ";
  if (!force)
    throw_bad_input("{}{} measured '{}' with {} {}, but the model '{}' has {} {}; profile this model (pipewright profile "
                    "--model ...) or pass --force-profile to use it anyway",
                    prefix, path, profile.model->name, d->figure, d->recorded, model.name, d->figure, d->model);
  return fmt::format("measured '{}' with {} {} against {}, used by --force-profile", profile.model->name, d->figure,
                     d->recorded, d->model);
}

}  // namespace

void CostModelChain::add_profile_file(const std::string& path, const Model& model, const std::string& option,
                                      bool force) {
  Profile profile;
  try {
    profile = load_profile(path);
  } catch (const Error& e) {
    if (option.empty()) throw;
    throw Error(e.kind(), fmt::format("{}: {}", option, e.what()));
  }
  ProfileOrigin origin;
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  origin.path = ec ? path : absolute.lexically_normal().string();
  origin.tool = profile.tool;
  origin.machine = machine_text(profile.machine);
  origin.model_note = check_profiled_model(profile, model, path, option, force);
  add_profile(std::move(profile), model, std::move(origin));
}

std::string CostModelChain::description() const { return fmt::format("{}", fmt::join(labels_, " <- ")); }

namespace {

std::string workload_text(const Workload& w, int seq) {
  std::string text = fmt::format("micro-batch {} x {} tokens", w.micro_batch_size, seq);
  if (w.tp > 1) text += fmt::format(", tp {}", w.tp);
  if (w.recompute != Recompute::None) text += fmt::format(", {} recompute", to_string(w.recompute));
  return text;
}

int resolved_seq(const Model& model, const Workload& w) { return w.seq_len > 0 ? w.seq_len : model.default_seq_len(); }

// The model the profiled one falls back on: the one below it in the chain.
std::string below_name(const std::vector<std::unique_ptr<CostModel>>& models, const CostModel* profiled) {
  for (size_t i = 1; i < models.size(); ++i)
    if (models[i].get() == profiled) return models[i - 1]->name();
  return "analytic";
}

}  // namespace

std::vector<std::string> CostModelChain::coverage_lines(const Model& model, const std::vector<Workload>& workloads) const {
  std::vector<std::string> lines;
  if (!profiled_) return lines;
  const std::string below = below_name(models_, profiled_);
  for (const Workload& w : workloads) {
    const ProfileCoverage c = profiled_->coverage(model, w);
    std::string line = workload_text(w, resolved_seq(model, w)) + ": ";
    if (!c.profiled.empty()) line += fmt::format("{} from the profile", fmt::join(c.profiled, ", "));
    if (!c.profiled.empty() && !c.missing.empty()) line += "; ";
    if (!c.missing.empty()) line += fmt::format("{} from the {} model ({})", fmt::join(c.missing, ", "), below, c.reason);
    if (std::find(lines.begin(), lines.end(), line) == lines.end()) lines.push_back(line);
  }
  return lines;
}

nlohmann::ordered_json CostModelChain::to_json(const Model& model, const std::vector<Workload>& workloads) const {
  nlohmann::ordered_json chain = nlohmann::ordered_json::array();
  for (const auto& m : models_) chain.push_back(m->name());
  nlohmann::ordered_json j = {{"name", models_.back()->name()}, {"chain", chain}, {"overrides", overrides_}};
  if (origin_) {
    j["profile"] = {{"source", origin_->path.empty() ? "measured by this command" : "file"},
                    {"path", origin_->path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(origin_->path)},
                    {"tool", origin_->tool},
                    {"machine", origin_->machine},
                    {"measured_s", origin_->measured_s}};
  } else {
    j["profile"] = nullptr;
  }
  j["kernel_tables"] = tables_json();
  nlohmann::ordered_json coverage = nlohmann::ordered_json::array();
  if (profiled_)
    for (const Workload& w : workloads) {
      const ProfileCoverage c = profiled_->coverage(model, w);
      coverage.push_back({{"micro_batch_size", w.micro_batch_size},
                          {"seq_len", resolved_seq(model, w)},
                          {"tp", w.tp},
                          {"recompute", to_string(w.recompute)},
                          {"profiled", c.profiled},
                          {"fallback", c.missing},
                          {"reason", c.reason}});
    }
  j["coverage"] = coverage;
  return j;
}

void add_force_profile_option(CLI::App& cmd, bool& force) {
  cmd.add_flag("--force-profile", force,
               "Predict with --profile even when it measured a model of another shape (hidden size, heads, ...)");
}

void add_kernels_option(CLI::App& cmd, std::string& path) {
  cmd.add_option("--kernels", path,
                 "Folder of measured kernel tables (pipewright kernels import), or 'installed' for the one installed for "
                 "the cluster's GPU (--install); several separated by commas, each over the ones before: GEMM, "
                 "attention, collective and DeepEP all-to-all times by shape on the GPU they were measured on, the "
                 "analytic model elsewhere");
}

void CostModelChain::add_kernels(const std::string& path, const AttentionBackend* attention) {
  if (path.empty()) return;
  std::vector<std::string> folders;
  std::stringstream list(path);
  for (std::string f; std::getline(list, f, ',');) {
    if (f.empty()) throw_bad_input("--kernels: '{}' has an empty folder name; give folders separated by commas", path);
    folders.push_back(f);
  }
  if (folders.size() > kMaxKernelFolders)
    throw_bad_input("--kernels: {} folders; at most {}", folders.size(), kMaxKernelFolders);
  std::vector<TableCostModel*> added;
  for (const std::string& folder : folders) {
    std::shared_ptr<KernelTables> tables;
    try {
      tables = KernelTables::open(folder);
    } catch (const Error& e) {
      const std::string message = e.what();
      throw Error(e.kind(), message.rfind("--kernels: ", 0) == 0 ? message : "--kernels: " + message);
    }
    auto model = std::make_unique<TableCostModel>(*models_.back(), tables);
    added.push_back(model.get());
    tables_.push_back(model.get());
    models_.push_back(std::move(model));
  }
  // The folders that time attention take the backend; with none, the last refuses it, naming what it times.
  bool any = false;
  for (size_t i = 0; attention && i < added.size(); ++i)
    if (!added[i]->attention_kernels().empty() || (!any && i + 1 == added.size())) {
      added[i]->only_attention_kernels(*attention);
      any = true;
    }
  for (const TableCostModel* t : added) {
    const KernelTables& k = t->tables();
    labels_.push_back(fmt::format("kernel tables ({}: {} {}, {}{})", k.folder(), k.system(), k.software(),
                                  k.source().empty() ? "an unnamed source" : k.source(),
                                  t->attention_backend().empty() ? "" : "; attention " + t->attention_backend()));
  }
}

namespace {

nlohmann::ordered_json folder_json(const TableCostModel& tables) {
  const TableCostModel::Share t = tables.share();
  const auto counts = [](const TableCostModel::ShapeCounts& c) {
    return nlohmann::ordered_json{{"measured", c.measured},
                                  {"interpolated", c.interpolated},
                                  {"extrapolated", c.extrapolated},
                                  {"missing", c.missing}};
  };
  return {{"folder", tables.tables().folder()},
          {"system", tables.tables().system()},
          {"software", tables.tables().software()},
          {"attention_backend", tables.attention_backend().empty() ? nlohmann::ordered_json(nullptr)
                                                                   : nlohmann::ordered_json(tables.attention_backend())},
          {"table_s", t.table_s()},
          {"gemm_s", t.gemm_s},
          {"attention_s", t.attention_s},
          {"collective_s", t.collective_s},
          {"all_to_all_s", t.all_to_all_s},
          {"phase_s", t.phase_s},
          {"other_gpu_s", t.other_gpu_s},
          {"shapes", {{"gemms", counts(t.gemms)},
          {"attentions", counts(t.attentions)},
          {"collectives", counts(t.collectives)},
          {"all_to_alls", counts(t.all_to_alls)}}},
          {"missing", t.missing},
          {"absent_kinds", t.absent}};
}

// `elsewhere`: the other folders of the chain; a kind one of them holds is not named as missing from this one.
std::vector<std::string> folder_lines(const TableCostModel& tables, const std::vector<const TableCostModel*>& elsewhere = {}) {
  TableCostModel::Share s = tables.share();
  std::erase_if(s.absent, [&](const std::string& kind) {
    return std::any_of(elsewhere.begin(), elsewhere.end(), [&](const TableCostModel* t) { return t->tables().has(kind); });
  });
  const auto percent = [&](double part) { return s.phase_s > 0 ? 100 * part / s.phase_s : 0.0; };
  const auto counts = [](const TableCostModel::ShapeCounts& c) {
    return fmt::format("{} ({} measured, {} interpolated, {} extrapolated, {} not in the tables)", c.asked(), c.measured,
                       c.interpolated, c.extrapolated, c.missing);
  };
  std::vector<std::string> lines;
  // The expert all-to-alls are named only where some were asked (a run with DeepEP's tables).
  const bool all_to_alls = s.all_to_alls.asked() > 0;
  lines.push_back(fmt::format(
      "{:.1f}% of the layers' time from the kernel tables (GEMMs {:.1f}%, attention {:.1f}%, tp collectives "
      "{:.1f}%{}), the rest from the model below",
      percent(s.table_s()), percent(s.gemm_s), percent(s.attention_s), percent(s.collective_s),
      all_to_alls ? fmt::format(", expert all-to-alls {:.1f}%", percent(s.all_to_all_s)) : std::string()));
  lines.push_back("distinct shapes asked: GEMM " + counts(s.gemms) + ", attention " + counts(s.attentions) +
                  ", tp collective " + counts(s.collectives) +
                  (all_to_alls ? ", expert all-to-all " + counts(s.all_to_alls) : std::string()));
  if (s.other_gpu_s > 0)
    lines.push_back(fmt::format("{:.1f}% of it on GPUs other than the tables' {}: from the model below",
                                percent(s.other_gpu_s), tables.tables().system()));
  if (!s.absent.empty()) {
    std::string kinds;
    for (const std::string& k : s.absent) kinds += (kinds.empty() ? "" : ", ") + k;
    lines.push_back("the tables hold no " + kinds + ": that work from the model below");
  }
  if (!s.missing.empty())
    lines.push_back("the first shape not in the tables (its part from the model below): " + s.missing.front());
  return lines;
}

}  // namespace

nlohmann::ordered_json CostModelChain::tables_json() const {
  if (tables_.empty()) return nullptr;
  if (tables_.size() == 1) return folder_json(*tables_.front());
  nlohmann::ordered_json folders = nlohmann::ordered_json::array();
  for (const TableCostModel* t : tables_) folders.push_back(folder_json(*t));
  return {{"folders", folders}};
}

std::vector<std::string> CostModelChain::table_lines() const {
  if (tables_.size() == 1) return folder_lines(*tables_.front());
  std::vector<std::string> lines;
  for (const TableCostModel* t : tables_) {
    lines.push_back(fmt::format("{} ({} {}):", t->tables().folder(), t->tables().system(), t->tables().software()));
    std::vector<const TableCostModel*> others;
    for (const TableCostModel* o : tables_)
      if (o != t) others.push_back(o);
    for (const std::string& line : folder_lines(*t, others)) lines.push_back("  " + line);
  }
  return lines;
}

void add_calibration_option(CLI::App& cmd, std::string& path) {
  cmd.add_option("--calibration", path,
                 "Calibration JSON from `pipewright calibrate`: fitted layer, link and overhead costs on top of the rest");
}

void add_calibration(CostModelChain& chain, const std::string& path) {
  if (path.empty()) return;
  chain.add([path](const CostModel& below) { return load_calibrated_cost_model(path, below); },
            fmt::format("calibrated ({})", path));
}

}  // namespace pw
