#pragma once
// A cost model priced from measured kernel tables where they answer (docs/kernel-tables.md): each layer
// phase's dense GEMMs (PhaseWork::gemms) timed shape by shape from the tables, on the GPUs the tables were
// measured on, and everything else (attention, memory-bound work, collectives, the routed experts' grouped
// GEMMs, a phase with a shape the tables cannot answer, another GPU) from the model below, which must price a
// phase as the sum of its parts, as the analytic model does: the tables' GEMMs replace exactly what it charges
// for them. It counts what it priced, so that every report can say how much of the compute came from tables
// and how much from the model.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>

#include "core/cost_model.hpp"
#include "kernels/kernel_queries.hpp"

namespace pw {

// Whether a GPU (its cluster name, "H200 SXM 141GB") is the one an AIConfigurator system names
// ("h200_sxm"): the same chip, and the same form factor when both say it (sxm, pcie).
bool gpu_matches_system(const std::string& gpu_name, const std::string& system);

class TableCostModel : public CostModelOver {
 public:
  TableCostModel(const CostModel& below, std::shared_ptr<KernelTables> tables);

  std::string name() const override;
  double phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& tp_link,
                    int tp) const override;

  // What priced the layers' phases so far: seconds of GEMMs from the tables, seconds of the whole phases (of
  // which other_gpu_s on GPUs the tables were not measured on), and the distinct GEMM shapes asked for, by how
  // they were read (a phase with one shape the tables lack is the model's, whole).
  struct Share {
    double table_s = 0, phase_s = 0, other_gpu_s = 0;
    long measured = 0, interpolated = 0, extrapolated = 0, missing = 0;
    std::string first_missing;  // the first shape the tables lacked, and why
  };
  Share share() const;
  const KernelTables& tables() const { return queries_.tables(); }

 private:
  // The most GEMMs one part of a phase may have for the tables to price it (a block has 4 to 8, an MoE
  // block's shared experts and router a few more).
  static constexpr size_t kMaxPhaseGemms = 32;
  // A shape's answer in the cache, or nullptr (under the shared lock); looked up and cached (under the lock).
  const TableTime* cached(const GemmShape& g) const;
  const TableTime* look_up(const GemmShape& g) const;
  void note_missing(const GemmShape& g, const Layer& layer, const TableTime& t) const;

  std::string system_;
  // Lookups are shared (the plan search prices from several threads); building a grid or caching an answer
  // takes the lock alone.
  mutable std::shared_mutex mutex_;
  mutable KernelQueries queries_;
  mutable std::map<std::tuple<bool, double, double, double>, TableTime> cache_;
  mutable std::map<std::string, bool> gpus_;  // GPU name: whether it is the tables' own
  mutable std::atomic<double> table_s_{0}, phase_s_{0}, other_gpu_s_{0};
  mutable std::mutex missing_mutex_;
  mutable std::string first_missing_;
};

}  // namespace pw
