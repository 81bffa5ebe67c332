#include "sim/chrome_trace.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/version.hpp"

namespace pw {
namespace {

using nlohmann::json;

// Trace time is in microseconds; three decimals keep nanoseconds and make short numbers.
double micros(double seconds) { return std::round(seconds * 1e9) / 1e3; }

int tid_of(Lane lane) { return static_cast<int>(lane); }

constexpr Lane kLanes[] = {Lane::Compute, Lane::Send, Lane::Recv, Lane::Collective, Lane::Optimizer, Lane::AllToAll};

json metadata(const char* what, int pid, int tid, json args) {
  json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

std::string default_label(int rank, const std::set<int>& stages) {
  if (stages.empty()) return fmt::format("rank {}", rank);
  std::string list;
  for (int s : stages) list += fmt::format("{}{}", list.empty() ? "" : ", ", s);
  return fmt::format("rank {} ({} {})", rank, stages.size() == 1 ? "stage" : "stages", list);
}

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(nlohmann::json other_data) : other_data_(std::move(other_data)) {
  if (!other_data_.is_object()) other_data_ = json::object();
}

void ChromeTraceWriter::on_start(int ranks) {
  ranks_ = ranks;
  events_ = json::array();
  stages_.assign(static_cast<std::size_t>(ranks), {});
}

void ChromeTraceWriter::on_event(const SimEvent& e) {
  json args;
  std::string name;
  if (e.lane == Lane::Collective) {
    name = fmt::format("grad_reduce stage {}", e.action.stage);
    args = {{"stage", e.action.stage}, {"op", "grad_reduce"}};
  } else if (e.lane == Lane::Optimizer) {
    name = "optimizer step";
    args = {{"op", "optimizer_step"}};
  } else {
    name = to_text(e.action);
    args = {{"stage", e.action.stage}, {"microbatch", e.action.microbatch}, {"op", to_string(e.action.op)}};
    if (e.action.op == Op::FB) {
      args["stage2"] = e.action.stage2;
      args["microbatch2"] = e.action.microbatch2;
    }
  }
  if (e.lane == Lane::AllToAll) {
    name = "all-to-all " + to_text(e.action);
    all_to_all_ = true;
  }
  if (e.lane != Lane::Compute && e.lane != Lane::Optimizer && e.lane != Lane::AllToAll) args["bytes"] = e.bytes;
  args["predicted_us"] = micros(e.end_s - e.start_s);
  if (e.lane == Lane::Compute && e.rank >= 0 && e.rank < static_cast<int>(stages_.size())) {
    stages_[static_cast<std::size_t>(e.rank)].insert(e.action.stage);
    if (e.action.op == Op::FB) stages_[static_cast<std::size_t>(e.rank)].insert(e.action.stage2);
  }
  const double ts = micros(e.start_s);
  events_.push_back({{"name", name},
                     {"cat", to_string(e.lane)},
                     {"ph", "X"},
                     {"ts", ts},
                     {"dur", std::round((micros(e.end_s) - ts) * 1e3) / 1e3},
                     {"pid", e.rank},
                     {"tid", tid_of(e.lane)},
                     {"args", std::move(args)}});
  // The arrow from a send to its receive: both ends bind to the slice that encloses their timestamp.
  if (e.flow_id >= 0 && (e.lane == Lane::Send || e.lane == Lane::Recv)) {
    events_.push_back({{"name", "p2p"},
                       {"cat", "p2p"},
                       {"ph", e.lane == Lane::Send ? "s" : "f"},
                       {"bp", "e"},
                       {"id", e.flow_id},
                       {"ts", ts},
                       {"pid", e.rank},
                       {"tid", tid_of(e.lane)}});
  }
}

void ChromeTraceWriter::on_memory(int rank, double time_s, double bytes_in_use) {
  events_.push_back({{"name", "memory"},
                     {"ph", "C"},
                     {"ts", micros(time_s)},
                     {"pid", rank},
                     {"args", {{"bytes", bytes_in_use}}}});
}

void ChromeTraceWriter::on_finish(double step_time_s) { other_data_["step_time_s"] = step_time_s; }

void ChromeTraceWriter::set_rank_label(int rank, const std::string& label) { labels_[rank] = label; }

nlohmann::json ChromeTraceWriter::trace() const {
  json events = json::array();
  for (int r = 0; r < ranks_; ++r) {
    auto label = labels_.find(r);
    events.push_back(metadata(
        "process_name", r, -1,
        {{"name", label != labels_.end() ? label->second : default_label(r, stages_[static_cast<std::size_t>(r)])}}));
    events.push_back(metadata("process_sort_index", r, -1, {{"sort_index", r}}));
    for (Lane lane : kLanes) {
      if (lane == Lane::AllToAll && !all_to_all_) continue;  // models without routed experts have none
      events.push_back(metadata("thread_name", r, tid_of(lane), {{"name", to_string(lane)}}));
      events.push_back(metadata("thread_sort_index", r, tid_of(lane), {{"sort_index", tid_of(lane)}}));
    }
  }
  for (const json& e : events_) events.push_back(e);
  json other = other_data_;
  other["tool"] = fmt::format("pipewright {} simulator", kVersion);
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", std::move(other)}};
}

void ChromeTraceWriter::write(const std::string& path) const { write_json_file(path, trace()); }

void write_json_file(const std::string& path, const nlohmann::json& doc) { write_output_file(path, doc.dump() + '\n'); }

}  // namespace pw
