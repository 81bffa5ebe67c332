#include "cli/work_bounds.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

void add_allow_large_flag(CLI::App& cmd, bool& allow_large) {
  cmd.add_flag("--allow-large", allow_large,
               fmt::format("Start even when the estimated memory or time exceeds this machine's available memory or {}",
                           format_duration(kWorkSecondsLimit)));
}

void check_work_unless_allowed(const std::string& command, const std::vector<WorkEstimate>& parts, bool allow_large) {
  if (!allow_large) check_work(command, parts, machine_work_limits());
}

SimulationSource simulation_source(const ScenarioOptions& o, const std::string& schedule_csv) {
  return SimulationSource{o.global_batch_size.has_value(), !o.plan.empty() ? o.plan : schedule_csv};
}

void check_top(int top) {
  if (top < 1) throw_bad_input("--top: must be at least 1, got {}", top);
  if (top > kMaxTop) throw_bad_input("--top: at most {} plans, got {}; ask for fewer", kMaxTop, top);
}

}  // namespace pw
