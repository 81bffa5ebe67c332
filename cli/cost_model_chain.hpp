#pragma once
// The cost model a command predicts with, built in one place for simulate, plan, run and compare: a chain
// with the analytic model (its --cost-param overrides applied) at the bottom and, above it, what was
// measured (--profile). Each model answers what it knows and asks the one below for the rest, so a model
// added later (a calibrated one) goes on top with add().
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/cost_model.hpp"
#include "core/workload.hpp"
#include "kernels/table_cost_model.hpp"
#include "profiler/profiled_cost_model.hpp"

namespace pw {

// Where the chain's profile came from.
struct ProfileOrigin {
  std::string path;       // the file read, absolute; empty when this command measured it
  std::string tool;       // the profile's writer
  std::string machine;    // "cpu: <device> (<cores> cores)"
  double measured_s = 0;  // seconds this command spent measuring it (0 when read from a file)
  // How far its model was checked against the one predicted: "" when it matched (or was measured here), "no
  // model recorded, not checked" for an old profile, the difference when --force-profile let it through.
  std::string model_note;
};

// "cpu: <device> (<cores> cores)" for a profile's machine.
std::string machine_text(const MachineInfo& machine);

// The most folders --kernels takes (each a layer of the chain).
inline constexpr size_t kMaxKernelFolders = 8;

class CostModelChain {
 public:
  // The analytic model at `defaults` with NAME=VALUE overrides (BadInput for a bad one).
  explicit CostModelChain(const std::vector<std::string>& cost_params = {}, AnalyticCostParams defaults = {});

  // Puts a model on top: `make` receives the current top, to fall back on. `label` stands for it in
  // description(), e.g. "calibrated (fit.json)".
  using Maker = std::function<std::unique_ptr<CostModel>(const CostModel& below)>;
  void add(const Maker& make, std::string label);
  // Puts the profile on top, for `model`'s layer shapes.
  void add_profile(Profile profile, const Model& model, ProfileOrigin origin);
  // Reads `path` and puts it on top; errors start with "<option>: " (none when `option` is empty). A profile
  // that records a model whose shape differs from `model`'s is BadInput naming the first differing figure,
  // unless `force`.
  void add_profile_file(const std::string& path, const Model& model, const std::string& option = "--profile",
                        bool force = false);

  const CostModel& model() const { return *models_.back(); }
  // One line for reports, bottom to top: "analytic <- profiled (/abs/profile.json: pipewright 0.1.0 profiler
  // (cpu) on cpu: <device> (2 cores))"; overrides in brackets after "analytic".
  std::string description() const;
  const ProfiledCostModel* profiled() const { return profiled_; }
  // Puts the kernel tables of folder `path` on top (--kernels; nothing when empty), or of several folders
  // separated by commas, each over the ones before it (one framework's GEMMs, another's DeepEP all-to-alls):
  // their times replace the model's on the GPU they were measured on. BadInput starting "--kernels: " for a
  // folder that is not one. `attention`: price attention from that backend's kernels alone (--attention-backend),
  // in the folders that time attention.
  void add_kernels(const std::string& path, const AttentionBackend* attention = nullptr);
  // The top folder's model (null without tables); all of them, bottom first.
  const TableCostModel* tables() const { return tables_.empty() ? nullptr : tables_.back(); }
  const std::vector<const TableCostModel*>& table_models() const { return tables_; }
  // The tables' folder, source and what they priced so far (the JSON reports' "kernel_tables"); null without;
  // with several folders {"folders": [one such object each, bottom first]}.
  nlohmann::ordered_json tables_json() const;
  // What the tables priced so far, for reports: a line of how much of the layers' time came from them (GEMMs,
  // attention, tp collectives, expert all-to-alls), one of how the shapes were read, and one naming the first
  // shape they lacked; empty without tables; with several folders, each folder's lines after its name.
  std::vector<std::string> table_lines() const;
  const std::optional<ProfileOrigin>& profile_origin() const { return origin_; }
  const std::vector<std::string>& overrides() const { return overrides_; }

  // For each workload, which of `model`'s layers the profile times and which the model below it answers
  // for (and why), one line per distinct answer in the workloads' order; empty without a profile.
  std::vector<std::string> coverage_lines(const Model& model, const std::vector<Workload>& workloads) const;
  // {"name": the top's name, "chain": bottom to top, "overrides", "profile": {"source" ("file" or
  // "measured by this command"), "path", "tool", "machine", "measured_s"} or null, "coverage": one entry per
  // workload, empty without a profile}.
  nlohmann::ordered_json to_json(const Model& model, const std::vector<Workload>& workloads) const;

 private:
  std::vector<std::unique_ptr<CostModel>> models_;  // bottom first; heap objects, so references stay valid
  std::vector<std::string> labels_;
  std::vector<std::string> overrides_;
  const ProfiledCostModel* profiled_ = nullptr;
  std::vector<const TableCostModel*> tables_;
  std::optional<ProfileOrigin> origin_;
};

// --force-profile: predict with a profile of another model.
void add_force_profile_option(CLI::App& cmd, bool& force);

// --kernels DIR: a folder of kernel tables (`pipewright kernels import`), priced from where it answers.
void add_kernels_option(CLI::App& cmd, std::string& path);

// --calibration FILE: `pipewright calibrate`'s fitted model, put on top of a chain (nothing when empty).
void add_calibration_option(CLI::App& cmd, std::string& path);
void add_calibration(CostModelChain& chain, const std::string& path);

}  // namespace pw
