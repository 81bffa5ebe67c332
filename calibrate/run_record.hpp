#pragma once
// An executor run as calibration reads it: `pipewright run --json` output (with the scenario it embeds,
// so that the run can be simulated again) and, optionally, its `--trace` file (per-action timings).
#include <optional>
#include <string>
#include <vector>

#include "schedules/ir.hpp"
#include "sim/scenario.hpp"

namespace pw {

// One complete slice of a measured trace: a compute action or a send, in seconds since the iteration began.
struct TraceSlice {
  int rank = 0;
  Action action;
  double start_s = 0;
  double end_s = 0;
};

struct RunTrace {
  std::string path;
  std::vector<TraceSlice> compute;
  std::vector<TraceSlice> sends;
};

struct RunRecord {
  std::string path;
  std::string version;   // pipewright_version of the writer
  std::string backend;   // "cpu"
  std::string compute;   // "real" or "sleep"
  Scenario scenario;     // as run: its layer ranges and the schedule it executed
  double measured_step_s = 0;  // median over the measured iterations
  std::vector<double> busy_s;  // per pipeline rank: compute wall time in the median iteration
  bool machine_shared = false;  // the run found its machine shared (machine_load; runs before it: false)
  std::string machine_verdict;  // and said so in this line
  std::optional<RunTrace> trace;
};

// BadInput naming `path` and the field: malformed JSON, a missing scenario (a run written before runs
// carried one), a step or busy time that is null (NaN when written) or not positive.
RunRecord run_from_json_text(const std::string& text, const std::string& path);
RunRecord load_run(const std::string& path);
// BadInput naming `path` for a file that is not a pipewright trace (Chrome trace JSON of `run --trace`).
RunTrace trace_from_json_text(const std::string& text, const std::string& path);
RunTrace load_trace(const std::string& path);

}  // namespace pw
