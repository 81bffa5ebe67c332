#include "planner/exports.hpp"

#include "core/error.hpp"
#include "planner/export_deepspeed.hpp"
#include "planner/export_megatron.hpp"
#include "planner/export_torchtitan.hpp"
#include "schedules/generators.hpp"

namespace pw {

ExportTarget export_target_from_string(const std::string& text) {
  if (text == "megatron") return ExportTarget::Megatron;
  if (text == "deepspeed") return ExportTarget::DeepSpeed;
  if (text == "torchtitan") return ExportTarget::Torchtitan;
  throw_bad_input("--export: unknown target '{}'; use megatron, deepspeed or torchtitan", text);
}

const char* to_string(ExportTarget t) {
  switch (t) {
    case ExportTarget::Megatron: return "megatron";
    case ExportTarget::DeepSpeed: return "deepspeed";
    case ExportTarget::Torchtitan: return "torchtitan";
  }
  return "?";
}

std::vector<std::string> export_schedules(ExportTarget t) {
  switch (t) {
    case ExportTarget::Megatron: return megatron_schedules();
    case ExportTarget::DeepSpeed: return {"1f1b"};
    case ExportTarget::Torchtitan: return schedule_names();
  }
  return {};
}

std::vector<Recompute> export_recomputes(ExportTarget t) {
  if (t == ExportTarget::DeepSpeed) return {Recompute::None, Recompute::Full};
  return {Recompute::None, Recompute::Selective, Recompute::Full};
}

std::vector<ExportFile> export_plan(ExportTarget t, const Evaluation& plan, const std::string& dir) {
  switch (t) {
    case ExportTarget::Megatron: return {megatron_export(plan)};
    case ExportTarget::DeepSpeed: return deepspeed_export(plan);
    case ExportTarget::Torchtitan: return torchtitan_export(plan, dir);
  }
  return {};
}

}  // namespace pw
