#include "calibrate/run_record.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "planner/plan_file.hpp"

namespace pw {
namespace {

// A measured time: present, a number (NaN is written as null) and positive.
double measured_time(const JsonFields& f, const std::string& key) {
  const nlohmann::json* it = f.find(key);
  if (!it) f.fail(key, "is missing or null (a NaN timing); the run measured nothing usable: run it again");
  if (!it->is_number()) f.fail(key, fmt::format("must be a number of seconds, got {}", it->dump()));
  const double x = it->get<double>();
  if (!(x > 0) || !std::isfinite(x)) f.fail(key, fmt::format("is {}; a measured time must be positive: run it again", x));
  return x;
}

}  // namespace

RunRecord run_from_json_text(const std::string& text, const std::string& path) {
  const nlohmann::json doc = parse_json_text(text, path);
  const JsonFields f(doc, path);
  RunRecord r;
  r.path = path;
  if (!f.has("scenario"))
    f.fail("scenario", "is missing: this is not `pipewright run --json` output of this version; run it again with --json");
  r.version = f.optional_string("pipewright_version").value_or("");
  r.backend = f.string("backend");
  r.compute = f.string("compute");
  r.measured_step_s = measured_time(f, "measured_step_time_s");
  const nlohmann::json& ranks = f.required("ranks");
  if (!ranks.is_array() || ranks.empty()) f.fail("ranks", "must be a non-empty array of per-rank results");
  // With data-parallel replicas (`run --dp`) a row per replica's rank: the replicas compute alike, and
  // replica 0's ranks are the pipeline the fits see.
  for (size_t i = 0; i < ranks.size(); ++i) {
    const JsonFields rank(ranks[i], path, fmt::format("ranks[{}].", i));
    if (rank.has("replica") && rank.non_negative_integer("replica") > 0) continue;
    if (rank.non_negative_integer("rank") != static_cast<long>(r.busy_s.size()))
      rank.fail("rank", fmt::format("must be {} (ranks in order)", r.busy_s.size()));
    r.busy_s.push_back(measured_time(rank, "busy_s"));
  }
  if (f.has("machine_load")) {
    const JsonFields load = f.object("machine_load");
    r.machine_shared = load.boolean("shared", false);
    r.machine_verdict = load.optional_string("verdict").value_or("");
  }
  if (!f.required("scenario").is_object()) f.fail("scenario", "must be the embedded scenario object");
  r.scenario = plan_from_json_text(f.required("scenario").dump(), path + ": scenario").scenario;
  if (static_cast<int>(r.busy_s.size()) != r.scenario.parallel.pp)
    f.fail("ranks", fmt::format("has {} ranks but the scenario has pp {}", r.busy_s.size(), r.scenario.parallel.pp));
  return r;
}

RunRecord load_run(const std::string& path) { return run_from_json_text(read_text_file(path, "run"), path); }

RunTrace trace_from_json_text(const std::string& text, const std::string& path) {
  const nlohmann::json doc = parse_json_text(text, path);
  const JsonFields f(doc, path);
  const nlohmann::json& events = f.required("traceEvents");
  if (!events.is_array()) f.fail("traceEvents", "must be an array (a Chrome trace from pipewright run --trace)");
  RunTrace t;
  t.path = path;
  for (size_t i = 0; i < events.size(); ++i) {
    const JsonFields e(events[i], path, fmt::format("traceEvents[{}].", i));
    if (e.optional_string("ph").value_or("") != "X") continue;
    const std::string cat = e.optional_string("cat").value_or("");
    if (cat != "compute" && cat != "send") continue;
    TraceSlice s;
    s.rank = static_cast<int>(e.non_negative_integer("pid"));
    try {
      s.action = action_from_text(e.string("name"));
    } catch (const Error& err) {
      e.fail("name", err.what());
    }
    s.start_s = e.number("ts") * 1e-6;
    const double dur = e.number("dur");
    if (!(dur >= 0) || !std::isfinite(dur)) e.fail("dur", fmt::format("is {}; a duration must be >= 0", dur));
    s.end_s = s.start_s + dur * 1e-6;
    (cat == "compute" ? t.compute : t.sends).push_back(s);
  }
  if (t.compute.empty()) f.fail("traceEvents", "has no compute slices; give the trace `pipewright run --trace` wrote");
  return t;
}

RunTrace load_trace(const std::string& path) { return trace_from_json_text(read_text_file(path, "trace"), path); }

}  // namespace pw
