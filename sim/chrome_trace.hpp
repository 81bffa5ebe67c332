#pragma once
// An observer that writes the simulated iteration as a Chrome trace / Perfetto JSON timeline:
// pid = pipeline rank, tid = lane (compute, send, recv, collective, optimizer, and all-to-all for routed
// experts), complete (X) events with ts and dur in microseconds, flow arrows (s/f) from each send to its
// receive, and a "memory" counter per rank.
// The executor writes the same schema, so a simulated and a measured trace open side by side.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/pipeline_sim.hpp"

namespace pw {

class ChromeTraceWriter : public SimObserver {
 public:
  // `other_data` lands in the trace's "otherData" object (e.g. schedule, model, cluster names);
  // the writer adds "step_time_s" to it.
  explicit ChromeTraceWriter(nlohmann::json other_data = nlohmann::json::object());

  void on_start(int ranks) override;
  void on_event(const SimEvent& e) override;
  void on_memory(int rank, double time_s, double bytes_in_use) override;
  void on_finish(double step_time_s) override;

  // Replaces the process name of a rank (default "rank r (stages a, b)", from the stages seen).
  void set_rank_label(int rank, const std::string& label);

  // The whole trace object: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
  nlohmann::json trace() const;
  // Writes trace() to `path`; throws Runtime naming the path and the system's reason when it cannot.
  void write(const std::string& path) const;

 private:
  int ranks_ = 0;
  nlohmann::json events_ = nlohmann::json::array();  // X, s, f and C events in the order seen
  nlohmann::json other_data_;
  std::vector<std::set<int>> stages_;  // per rank, from the compute events
  std::map<int, std::string> labels_;
  bool all_to_all_ = false;  // an all-to-all event was seen: the lane is named
};

// Writes a JSON document to a file (two-space indent off: traces get large) with write_output_file.
void write_json_file(const std::string& path, const nlohmann::json& doc);

}  // namespace pw
