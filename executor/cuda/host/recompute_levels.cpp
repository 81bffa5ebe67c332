#include "executor/cuda/host/recompute_levels.hpp"

#include "core/error.hpp"

namespace pw {

std::vector<Recompute> layer_recompute_levels(int layers, const std::vector<LayerRange>& stages, Recompute level,
                                              const std::vector<Recompute>& stage_levels) {
  std::vector<Recompute> out(static_cast<size_t>(layers), level);
  if (stage_levels.empty()) return out;
  if (stage_levels.size() != stages.size())
    throw_bad_input("--stage-recompute: {} levels for {} stages; give one level per stage", stage_levels.size(),
                    stages.size());
  for (size_t s = 0; s < stages.size(); ++s)
    for (int i = stages[s].first; i <= stages[s].last; ++i)
      if (i >= 0 && i < layers) out[static_cast<size_t>(i)] = stage_levels[s];
  return out;
}

}  // namespace pw
