#include "serving/serving_trace.hpp"

#include <fmt/format.h>

namespace pw {

nlohmann::json serving_trace(const ServingResult& result, int stages, nlohmann::json other_data) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "serving engine"}}}});
  for (int s = 0; s < stages; ++s)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", s}, {"args", {{"name", fmt::format("stage {}", s)}}}});
  for (const ServingResult::Span& sp : result.spans)
    events.push_back({{"name", fmt::format("batch {} ({} tokens)", sp.batch, sp.tokens)},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", sp.stage},
                      {"ts", sp.start_s * 1e6},
                      {"dur", (sp.end_s - sp.start_s) * 1e6},
                      {"args", {{"batch", sp.batch}, {"tokens", sp.tokens}}}});
  other_data["makespan_s"] = result.makespan_s;
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", other_data}};
}

}  // namespace pw
