#pragma once
// The schedule options of simulate, show and compare beyond --schedule: optimizer post-validation
// (--no-sync-optimizer) and PyTorch schedule files (--schedule-csv to read one, --export-csv to write one).
#include <CLI/CLI.hpp>
#include <string>

#include "cli/scenario_options.hpp"
#include "sim/scenario.hpp"

namespace pw {

struct ScheduleFileOptions {
  bool no_sync_optimizer = false;
  std::string schedule_csv;
  std::string export_csv;

  // `with_files` false: only --no-sync-optimizer (compare, which runs named schedules).
  void add_to(CLI::App& cmd, bool with_files);
  // --schedule-csv, an input, and --export-csv, an output, for check_outputs.
  OptionPath input_path() const { return {"--schedule-csv", schedule_csv}; }
  OptionPath output_path() const { return {"--export-csv", export_csv}; }
  // Reads --schedule-csv (BadInput when --schedule is given as well, naming both) and lets its
  // micro-batch count stand in for --microbatches when neither that nor --global-batch-size is given.
  void prepare(const CLI::App& cmd, ScenarioOptions& scenario);
  // Sets the scenario's optimizer mode and imported schedule.
  void apply(Scenario& scenario) const;
  // Writes the evaluated schedule to --export-csv, when given (the imported one with its own
  // communication, a generated one compute-only, as torchtitan's pipeline_parallel_schedule_csv reads it).
  void export_schedule(const Evaluation& ev) const;

 private:
  std::optional<Schedule> imported_;
};

}  // namespace pw
