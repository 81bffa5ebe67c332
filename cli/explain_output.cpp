#include "cli/explain_output.hpp"

#include <fmt/format.h>

#include "core/units.hpp"

namespace pw {

void print_explanation(std::ostream& out, const PlanExplanation& e) {
  const StepBreakdown& b = e.step;
  out << fmt::format("\nwhy plan 1: its step of {} as pipeline rank {} (the busiest) spends it\n", format_seconds(b.step_s),
                     b.rank);
  // The busiest rank waits least: its idle time is not the plan's bubble, which the table averages over the ranks.
  for (const Loss& l : parts_of(b))
    out << fmt::format("  {:<10} {:>10}  {:>6}\n", l.part, format_seconds(l.seconds), format_percent(l.seconds / b.step_s));
  if (e.ranks > 1)
    out << fmt::format("  (idle: this rank's waits on the schedule; the plan's bubble, {}, is the mean over its {} pipeline "
                       "ranks)\n",
                       format_percent(e.bubble_fraction), e.ranks);
  for (size_t i = 0; i < e.binding.size(); ++i)
    out << fmt::format("{} {}\n", i == 0 ? "binds:" : "      ", e.binding[i]);
  for (const std::string& line : e.choice) out << line << "\n";
  if (!e.runners_up.empty()) out << "runners-up against plan 1:\n";
  for (const RunnerUp& r : e.runners_up) out << "  " << r.line << "\n";
}

nlohmann::ordered_json explanation_json(const PlanExplanation& e) {
  nlohmann::ordered_json parts = nlohmann::ordered_json::object();
  for (const Loss& l : parts_of(e.step)) parts[l.part + "_s"] = l.seconds;
  nlohmann::ordered_json runners = nlohmann::ordered_json::array();
  for (const RunnerUp& r : e.runners_up)
    runners.push_back({{"plan", r.rank},
                       {"loss_s", r.loss_s},
                       {"differs", r.differs},
                       {"most", r.most.part},
                       {"most_s", r.most.seconds},
                       {"line", r.line}});
  return {{"rank", e.step.rank}, {"step_time_s", e.step.step_s}, {"bubble_fraction", e.bubble_fraction}, {"breakdown", parts}, {"binding", e.binding},
          {"runners_up", runners}, {"choice", e.choice}};
}

}  // namespace pw
