#include "core/moe.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace pw {

bool MoeConfig::moe_block(int i) const {
  if (experts <= 0 || i < first_dense) return false;
  if (every > 1 && (i + 1) % every != 0) return false;
  return std::find(dense_blocks.begin(), dense_blocks.end(), i) == dense_blocks.end();
}

double MoeConfig::routed_parameters(int hidden, bool gated) const {
  const double h = hidden, f = expert_ffn;
  const double per_expert = (gated ? 3 : 2) * h * f + (expert_bias ? (gated ? 2 : 1) * f + h : 0);
  return experts * per_expert;
}

double MoeConfig::router_parameters(int hidden) const {
  // DeepSeek-V3's e_score_correction_bias is no parameter: no gradient moves it (the balancing rule does) and
  // no optimizer keeps state for it (a buffer in transformers' DeepseekV3TopkRouter).
  return static_cast<double>(experts) * hidden + (expert_bias ? experts : 0);
}

double MoeConfig::shared_parameters(int hidden, bool gated) const {
  const double h = hidden, f = shared_expert_ffn;
  return (gated ? 3 : 2) * h * f + (shared_expert_gate && f > 0 ? h : 0);
}

void check_moe(const MoeConfig& moe, int layers, const std::string& source) {
  if (moe.experts < 1) throw_bad_input("{}: an MoE model needs at least 1 routed expert, got {}", source, moe.experts);
  if (moe.top_k < 1 || moe.top_k > moe.experts)
    throw_bad_input("{}: top_k {} is not between 1 and the {} experts; give a top_k <= {}", source, moe.top_k,
                    moe.experts, moe.experts);
  if (moe.expert_ffn < 1) throw_bad_input("{}: the experts' intermediate size is {}; give a positive size", source, moe.expert_ffn);
  if (moe.groups > 0) {
    if (moe.experts % moe.groups != 0)
      throw_bad_input("{}: {} expert groups do not divide the {} experts; give a divisor of {}", source, moe.groups,
                      moe.experts, moe.experts);
    if (moe.top_groups < 1 || moe.top_groups > moe.groups)
      throw_bad_input("{}: the top {} groups are not between 1 and the {} groups; give a number from 1 to {}", source,
                      moe.top_groups, moe.groups, moe.groups);
    if (moe.top_k > static_cast<long>(moe.top_groups) * (moe.experts / moe.groups))
      throw_bad_input("{}: top_k {} is more than the {} experts of the top {} groups; give more top groups", source,
                      moe.top_k, static_cast<long>(moe.top_groups) * (moe.experts / moe.groups), moe.top_groups);
  } else if (moe.top_groups > 0) {
    throw_bad_input("{}: top groups {} without expert groups; give the groups too, or neither", source, moe.top_groups);
  }
  bool any = false;
  for (int i = 0; i < layers && !any; ++i) any = moe.moe_block(i);
  if (!any)
    throw_bad_input("{}: the dense-layer pattern (first {} dense, every {}) leaves none of the {} layers MoE; give fewer "
                    "dense layers",
                    source, moe.first_dense, moe.every, layers);
}

}  // namespace pw
