#pragma once
// The contiguous split of costed layers into stages that split_layers makes when no split is given:
// the smallest largest stage cost, exactly; among splits reaching it, the least sum of squared stage
// costs (so the stages that are not the bottleneck are balanced too); ties give later stages more
// layers (earlier stages hold more micro-batches' activations under 1F1B).
#include <utility>
#include <vector>

namespace pw {

// Stage s holds layers [result[s].first, result[s].second] (inclusive). Requires 1 <= stages <=
// costs.size() and finite costs >= 0.
// Time: O(64 n) for the largest stage cost (a binary search over doubles, each step a greedy pass),
// then O(n log n) per stage over the layers where that stage may end, which are few when the costs
// are balanced (every layer costing the same: a handful per stage).
std::vector<std::pair<int, int>> balanced_split(const std::vector<double>& costs, int stages);

}  // namespace pw
