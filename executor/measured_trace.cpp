#include "executor/measured_trace.hpp"

#include <algorithm>
#include <cmath>
#include <set>

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
    case Op::BW: return at(a.stage).full_backward_s();
    case Op::FB: return at(a.stage).forward_s + at(a.stage2).full_backward_s();
    default: return 0;
  }
}

// Each rank's optimizer step as predicted: the sum over the stages it computed.
std::vector<double> predicted_optimizer_s(const IterationRecord& iteration, const std::vector<StageCost>& stages) {
  std::vector<double> out;
  for (const RankIteration& r : iteration.ranks) {
    std::set<int> held;
    for (const SimEvent& e : r.events) {
      if (e.lane != Lane::Compute) continue;
      held.insert(e.action.stage);
      if (e.action.op == Op::FB) held.insert(e.action.stage2);
    }
    double s = 0;
    for (int stage : held)
      if (stage >= 0 && stage < static_cast<int>(stages.size())) s += stages[static_cast<size_t>(stage)].optimizer_s;
    out.push_back(s);
  }
  return out;
}

double micros(double s) { return std::round(s * 1e9) / 1e3; }

}  // namespace

nlohmann::json measured_trace(const IterationRecord& iteration, const std::vector<StageCost>& predicted,
                              const std::string& backend, nlohmann::json other_data) {
  ChromeTraceWriter writer(std::move(other_data));
  replay(iteration, writer);
  nlohmann::json trace = writer.trace();
  const std::vector<double> optimizer_s = predicted_optimizer_s(iteration, predicted);
  for (nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    nlohmann::json& args = e["args"];
    args["measured_us"] = e["dur"];
    args.erase("predicted_us");
    if (e["cat"] == "compute") {
      Action a = action_from_text(e["name"].get<std::string>());
      args["predicted_us"] = micros(predicted_s(a, predicted));
    } else if (e["cat"] == "optimizer") {
      const auto rank = e["pid"].get<size_t>();
      if (rank < optimizer_s.size()) args["predicted_us"] = micros(optimizer_s[rank]);
    }
  }
  trace["otherData"]["iteration"] = iteration.iteration;
  trace["otherData"]["tool"] = fmt::format("pipewright {} executor ({})", kVersion, backend);
  return trace;
}

}  // namespace pw
