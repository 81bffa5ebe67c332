#include "executor/measured_trace.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/version.hpp"
#include "sim/chrome_trace.hpp"

namespace pw {

void replay(const IterationRecord& iteration, SimObserver& observer) {
  observer.on_start(static_cast<int>(iteration.ranks.size()));
  std::vector<SimEvent> events;
  for (const RankIteration& r : iteration.ranks) events.insert(events.end(), r.events.begin(), r.events.end());
  std::stable_sort(events.begin(), events.end(), [](const SimEvent& a, const SimEvent& b) {
    return a.start_s != b.start_s ? a.start_s < b.start_s : a.rank < b.rank;
  });
  for (const SimEvent& e : events) observer.on_event(e);
  for (size_t r = 0; r < iteration.ranks.size(); ++r)
    for (const MemorySample& m : iteration.ranks[r].memory) observer.on_memory(static_cast<int>(r), m.time_s, m.bytes);
  observer.on_finish(iteration.step_time_s);
}

namespace {

double predicted_s(const Action& a, const std::vector<StageCost>& stages) {
  auto at = [&](int s) -> const StageCost& { return stages[static_cast<size_t>(s)]; };
  switch (a.op) {
    case Op::F: return at(a.stage).forward_s;
    case Op::B: return at(a.stage).backward_input_s;
    case Op::W: return at(a.stage).backward_weight_s;
    case Op::BW: return at(a.stage).backward_input_s + at(a.stage).backward_weight_s;
    case Op::FB:
      return at(a.stage).forward_s + at(a.stage2).backward_input_s + at(a.stage2).backward_weight_s;
    default: return 0;
  }
}

}  // namespace

nlohmann::json measured_trace(const IterationRecord& iteration, const std::vector<StageCost>& predicted,
                              const std::string& backend, nlohmann::json other_data) {
  ChromeTraceWriter writer(std::move(other_data));
  replay(iteration, writer);
  nlohmann::json trace = writer.trace();
  for (nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    nlohmann::json& args = e["args"];
    args["measured_us"] = e["dur"];
    args.erase("predicted_us");
    if (e["cat"] == "compute") {
      Action a = action_from_text(e["name"].get<std::string>());
      args["predicted_us"] = std::round(predicted_s(a, predicted) * 1e9) / 1e3;
    }
  }
  trace["otherData"]["iteration"] = iteration.iteration;
  trace["otherData"]["tool"] = fmt::format("pipewright {} executor ({})", kVersion, backend);
  return trace;
}

}  // namespace pw
