#pragma once
// The sleep backend: each compute action waits for its predicted duration (the stage's costs) instead of
// computing, while tensors of the predicted boundary size really travel and activation memory follows the
// stage's deltas (F allocates, B frees all but what W needs, W the rest). It checks scheduling, transfers
// and runtime overheads at depths a real model could not reach on a few cores.
#include <vector>

#include "core/stage_costs.hpp"
#include "executor/backend.hpp"

namespace pw {

class SleepBackend : public Backend {
 public:
  explicit SleepBackend(std::vector<StageCost> stages);
  std::string name() const override { return "sleep"; }
  std::unique_ptr<RankCompute> make_rank(const RankSetup& setup) override;

 private:
  std::vector<StageCost> stages_;
};

// Waits until `deadline` as closely as the OS allows, in slices short enough to notice `stop` (then throws
// RunAborted).
void sleep_until(Clock::time_point deadline, const std::atomic<bool>* stop);

}  // namespace pw
