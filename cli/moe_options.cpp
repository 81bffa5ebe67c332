#include "cli/moe_options.hpp"

#include "core/expert_parallel.hpp"

namespace pw {

void MoeOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--capacity-factor", capacity_factor,
                 "Routed tokens each expert takes, as a multiple of the average, padded to it; 0: dropless (default)");
  cmd.add_option("--dispatcher", dispatcher,
                 "Token dispatcher for routed experts: alltoall (each copy to its expert's GPU) or flex (DeepEP, "
                 "HybridEP: one copy per token and remote node)")
      ->capture_default_str();
}

void MoeOptions::apply(Workload& w) const {
  check_capacity_factor(capacity_factor);  // before compare runs each schedule (a row each would say it)
  w.capacity_factor = capacity_factor;
  w.dispatcher = dispatcher_from_string(dispatcher);
}

}  // namespace pw
