#include "cli/schedule_options.hpp"

#include <filesystem>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/output_file.hpp"
#include "schedules/pytorch_csv.hpp"

namespace pw {

void ScheduleFileOptions::add_to(CLI::App& cmd, bool with_files) {
  cmd.add_flag("--no-sync-optimizer", no_sync_optimizer,
               "Optimizer post-validation: the next iteration starts before the global step completes (several "
               "iterations simulated, the steady state reported)");
  if (!with_files) return;
  cmd.add_option("--schedule-csv", schedule_csv,
                 "Run this PyTorch pipelining schedule CSV (one row per rank, e.g. 0F0,0I0,0W0) instead of --schedule");
  cmd.add_option("--export-csv", export_csv,
                 "Write the schedule as a PyTorch pipelining CSV (torchtitan's pipeline_parallel_schedule_csv)");
}

void ScheduleFileOptions::prepare(const CLI::App& cmd, ScenarioOptions& scenario) {
  if (schedule_csv.empty()) return;
  if (cmd.get_option("--schedule")->count() > 0)
    throw_bad_input("--schedule-csv: the file gives the schedule; drop --schedule {}", scenario.schedule);
  Schedule s = schedule_from_pytorch_csv(read_text_file(schedule_csv, "--schedule-csv: schedule"), schedule_csv);
  s.name = std::filesystem::path(schedule_csv).filename().string();
  if (!scenario.microbatches && !scenario.global_batch_size) scenario.microbatches = s.microbatches;
  imported_ = std::move(s);
}

void ScheduleFileOptions::apply(Scenario& scenario) const {
  scenario.synchronous_optimizer = !no_sync_optimizer;
  scenario.imported_schedule = imported_;
  if (!export_csv.empty()) check_pytorch_csv_copies(scenario.schedule, schedule_copies(scenario));
}

void ScheduleFileOptions::export_schedule(const Evaluation& ev) const {
  if (export_csv.empty()) return;
  const Schedule& s = ev.scenario.imported_schedule ? *ev.scenario.imported_schedule : ev.schedule;
  write_output_file(export_csv, schedule_to_pytorch_csv(s));
}

}  // namespace pw
