#include "kernels/table_cost_model.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

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
  const std::string gpu = alnum(gpu_name);
  if (chip.empty() || gpu.rfind(chip, 0) != 0) return false;
  for (const char* f : {"sxm", "pcie"})
    if (mentions(gpu, f) && !form.empty() && form != f) return false;
  return true;
}

TableCostModel::TableCostModel(const CostModel& below, std::shared_ptr<KernelTables> tables)
    : CostModelOver(below), system_(tables->system()), queries_(std::move(tables)) {}

std::string TableCostModel::name() const {
  return fmt::format("kernel tables ({} {}) over {}", system_, queries_.tables().software(), below_.name());
}

const TableTime* TableCostModel::cached(const GemmShape& g) const {
  const auto it = cache_.find(std::make_tuple(g.fp8, g.m, g.n, g.k));
  return it == cache_.end() ? nullptr : &it->second;
}

const TableTime* TableCostModel::look_up(const GemmShape& g) const {
  if (const TableTime* t = cached(g)) return t;
  const TableTime t = queries_.gemm(g.fp8 ? Precision::Fp8 : Precision::Bf16, g.m, g.n, g.k);
  return &cache_.emplace(std::make_tuple(g.fp8, g.m, g.n, g.k), t).first->second;
}

void TableCostModel::note_missing(const GemmShape& g, const Layer& layer, const TableTime& t) const {
  std::lock_guard lock(missing_mutex_);
  if (first_missing_.empty())
    first_missing_ = fmt::format("{} GEMM m {:g}, n {:g}, k {:g} in {}: {}", g.fp8 ? "fp8" : "bf16", g.m, g.n, g.k,
                                 layer.name, t.note);
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
  if ((!parts[0] || parts[0]->gemms.empty()) && (!parts[1] || parts[1]->gemms.empty())) return model_s;
  // Every answer this phase needs, under one shared lock; the lock alone only to read what was never asked.
  // Answers stay where the cache put them (a map's elements do not move).
  const TableTime* answers[2][kMaxPhaseGemms] = {};
  bool on_gpu = false, all_cached = true;
  {
    std::shared_lock read(mutex_);
    const auto gpu_it = gpus_.find(gpu.name);
    if (gpu_it == gpus_.end()) all_cached = false;
    on_gpu = gpu_it != gpus_.end() && gpu_it->second;
    for (int i = 0; i < 2 && all_cached && on_gpu; ++i)
      if (parts[i])
        for (size_t j = 0; j < parts[i]->gemms.size() && j < kMaxPhaseGemms; ++j)
          if (!(answers[i][j] = cached(parts[i]->gemms[j]))) all_cached = false;
  }
  if (!all_cached) {
    std::unique_lock write(mutex_);
    on_gpu = gpus_.emplace(gpu.name, gpu_matches_system(gpu.name, system_)).first->second;
    if (on_gpu)
      for (int i = 0; i < 2; ++i)
        if (parts[i])
          for (size_t j = 0; j < parts[i]->gemms.size() && j < kMaxPhaseGemms; ++j)
            answers[i][j] = look_up(parts[i]->gemms[j]);
  }
  if (!on_gpu) {
    other_gpu_s_ += model_s;
    phase_s_ += model_s;
    return model_s;
  }
  // The GEMMs the tables price, as work of their own: what the model below charges for them (their FLOPs at
  // its rates and a launch each) is taken off its time for the phase, and the tables' times put on. A part
  // with one shape the tables cannot answer (or more GEMMs than kMaxPhaseGemms) keeps the model's price, whole.
  LayerWork gemms_only;
  PhaseWork& priced = phase == Phase::Forward         ? gemms_only.forward
                      : phase == Phase::BackwardInput ? gemms_only.backward_input
                                                      : gemms_only.backward_weight;
  double table_s = 0;
  for (int i = 0; i < 2; ++i) {
    const PhaseWork* p = parts[i];
    if (!p || p->gemms.empty() || p->gemms.size() > kMaxPhaseGemms) continue;
    double part_s = 0, bf16 = 0, fp8 = 0;
    bool whole = true;
    for (size_t j = 0; j < p->gemms.size(); ++j) {
      const GemmShape& g = p->gemms[j];
      const TableTime& t = *answers[i][j];
      if (!t.found()) {
        whole = false;
        note_missing(g, layer, t);
        break;
      }
      part_s += t.seconds;
      (g.fp8 ? fp8 : bf16) += g.flops();
    }
    if (!whole) continue;
    priced.gemm_flops += bf16;
    priced.fp8_gemm_flops += fp8;
    priced.kernels += static_cast<int>(p->gemms.size());
    table_s += part_s;
  }
  const double s = table_s > 0 ? model_s - below_.phase_time(layer, gemms_only, phase, gpu, tp_link, tp) + table_s
                               : model_s;
  table_s_ += table_s;
  phase_s_ += s;
  return s;
}

TableCostModel::Share TableCostModel::share() const {
  Share s;
  s.table_s = table_s_;
  s.phase_s = phase_s_;
  s.other_gpu_s = other_gpu_s_;
  {
    std::lock_guard lock(missing_mutex_);
    s.first_missing = first_missing_;
  }
  std::shared_lock read(mutex_);
  for (const auto& [shape, t] : cache_) {
    s.measured += t.how == TableHow::Measured;
    s.interpolated += t.how == TableHow::Interpolated;
    s.extrapolated += t.how == TableHow::Extrapolated;
    s.missing += t.how == TableHow::Missing;
  }
  return s;
}

}  // namespace pw
