#pragma once
// The nesting of the tp, pp and dp dimensions in the global GPU index. tp is always innermost, so that a tp
// group is tp consecutive GPUs inside one node; the order of pp and dp decides which of the pipeline's
// transfers and the data-parallel reductions stay inside nodes.
#include <string>
#include <vector>

namespace pw {

enum class RankOrder {
  // global = dp_idx (pp tp) + pp_idx tp + tp_idx: pipeline neighbours close (Megatron-LM with
  // --use-tp-pp-dp-mapping)
  TpPpDp,
  // global = pp_idx (dp tp) + dp_idx tp + tp_idx: data-parallel peers close (Megatron-LM's default
  // tp-cp-ep-dp-pp, DeepSpeed's and torchtitan's pp-outermost meshes)
  TpDpPp,
};
const char* to_string(RankOrder order);                    // "tp-pp-dp", "tp-dp-pp"
RankOrder rank_order_from_string(const std::string& text);  // BadInput naming the choices otherwise
std::vector<RankOrder> rank_orders();                       // the standard orders, default first

}  // namespace pw
