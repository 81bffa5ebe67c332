#include "planner/baseline_splits.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"

namespace pw {

std::vector<LayerRange> uniform_split(const Model& model, int stages) { return split_layers(model, stages, {}); }

std::vector<double> layer_parameter_counts(const Model& model) {
  std::vector<double> counts;
  counts.reserve(model.layers.size());
  for (const Layer& l : model.layers) {
    if (l.kind == LayerKind::Explicit)
      counts.push_back(l.explicit_costs ? l.explicit_costs->parameter_bytes : 0.0);
    else
      counts.push_back(layer_parameters(*model.transformer, l.kind, l.block, 1).total());
  }
  return counts;
}

std::vector<int> deepspeed_partition_uniform(int items, int parts) {
  std::vector<int> out(static_cast<size_t>(parts) + 1, 0);
  if (items <= parts) {
    for (int p = 0; p <= parts; ++p) out[p] = std::min(p, items);
    return out;
  }
  const int chunk = items / parts;
  const int residual = items - chunk * parts;
  // numpy.arange(0, (parts + 1) * chunk, chunk), then parts[i + 1:] += 1 for each i < residual.
  for (int p = 0; p <= parts; ++p) out[p] = p * chunk + std::min(p, residual);
  return out;
}

std::vector<int> deepspeed_partition_balanced(const std::vector<double>& weights, int parts) {
  const int n = static_cast<int>(weights.size());
  const int m = parts;
  if (n <= m) return deepspeed_partition_uniform(n, m);
  constexpr double inf = std::numeric_limits<double>::infinity();
  const auto W = static_cast<size_t>(m + 1);
  auto at = [W](int i, int j) { return static_cast<size_t>(i) * W + static_cast<size_t>(j); };
  std::vector<double> dp_max((n + 1) * W, inf), dp_min((n + 1) * W, inf), dp_cost((n + 1) * W, inf);
  std::vector<int> position((n + 1) * W, 0);
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];  // numpy.cumsum adds in order too
  dp_max[at(0, 0)] = 0;
  dp_cost[at(0, 0)] = 0;
  for (int i = 1; i <= n; ++i)
    for (int j = 1; j <= std::min(i, m); ++j)
      for (int k = 0; k < i; ++k) {
        const double seg = prefix[i] - prefix[k];
        const double max_sum = std::max(dp_max[at(k, j - 1)], seg);
        const double min_sum = std::min(dp_min[at(k, j - 1)], seg);
        const double cost = max_sum - min_sum;
        if (dp_cost[at(i, j)] >= cost) {  // >=: a later cut wins a tie, as in DeepSpeed
          dp_cost[at(i, j)] = cost;
          dp_max[at(i, j)] = max_sum;
          dp_min[at(i, j)] = min_sum;
          position[at(i, j)] = k;
        }
      }
  std::vector<int> out{n};
  for (int j = m; j >= 1; --j) out.push_back(position[at(out.back(), j)]);
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<LayerRange> ranges_from_parts(const std::vector<int>& parts) {
  std::vector<LayerRange> out;
  for (size_t s = 0; s + 1 < parts.size(); ++s) out.push_back(LayerRange{parts[s], parts[s + 1] - 1});
  return out;
}

std::vector<int> parts_from_ranges(const std::vector<LayerRange>& ranges) {
  std::vector<int> parts;
  for (const LayerRange& r : ranges) parts.push_back(r.first);
  parts.push_back(ranges.empty() ? 0 : ranges.back().last + 1);
  return parts;
}

std::vector<LayerRange> parameters_split(const Model& model, int stages) {
  if (stages < 1 || stages > model.num_layers())
    throw_bad_input("--pp x --vpp = {} stages but model '{}' has {} layers; use between 1 and {} stages", stages,
                    model.name, model.num_layers(), model.num_layers());
  return ranges_from_parts(deepspeed_partition_balanced(layer_parameter_counts(model), stages));
}

}  // namespace pw
