#include "core/rank_order.hpp"

#include "core/error.hpp"

namespace pw {

const char* to_string(RankOrder order) { return order == RankOrder::TpPpDp ? "tp-pp-dp" : "tp-dp-pp"; }

RankOrder rank_order_from_string(const std::string& text) {
  for (RankOrder o : rank_orders())
    if (text == to_string(o)) return o;
  throw_bad_input("--rank-order: '{}' is not a rank order; use tp-pp-dp or tp-dp-pp", text);
}

std::vector<RankOrder> rank_orders() { return {RankOrder::TpPpDp, RankOrder::TpDpPp}; }

}  // namespace pw
