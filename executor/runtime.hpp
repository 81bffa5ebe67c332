#pragma once
// Runs a schedule for real: one thread per rank executes the rank's lowered action list exactly in order
// (the IR the simulator times). Compute actions call the backend; sends and receives move the tensors
// through a transport; tensors between stages on the same rank are handed over locally. An iteration
// starts with all ranks together and ends, after every rank's list, with a synchronised optimizer step.
// The ranks are threads of this process, or processes a launcher started, one rank each (ProcessGroup).
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "executor/backend.hpp"
#include "executor/process_group.hpp"
#include "executor/transport.hpp"
#include "schedules/ir.hpp"
#include "sim/pipeline_sim.hpp"

namespace pw {

// The bounds of RunOptions::timeout_s: below a millisecond every wait fails; above a day a wait is a hang.
inline constexpr double kMinTimeoutS = 1e-3;
inline constexpr double kMaxTimeoutS = 86400;
// BadInput "--timeout: must be a number of seconds from 0.001 to 86400 (a day), got inf" outside them (NaN too).
void check_timeout(double timeout_s);

struct RunOptions {
  int iterations = 1;   // measured
  int warmup = 0;       // run first, not measured
  // Data parallelism: this many copies of the pipeline run the schedule side by side, each on its own
  // micro-batches. Replica d's pipeline rank r is worker d * ranks + r: the index of its records, its
  // transport rank and, under a launcher, its process.
  int replicas = 1;
  // Longest wait for a receive or for the other ranks; with ranks as threads of one process also the
  // longest a rank may stay inside one action (a kernel, before_action) before it is overdue
  // (executor/stall_watch.hpp).
  double timeout_s = 60;
  bool optimizer_step = true;
  // Ranks as threads of this process compute in turns on this many cores (executor/core_turns.hpp), as the
  // simulator's SharedCores has them; 0: the OS runs every rank thread as it likes. Ranks as processes
  // ignore it (the OS shares the cores between them).
  int cores = 0;
  // Called on the rank's thread before each action; a test hook (throwing stops the run like a failing
  // kernel would).
  std::function<void(int rank, int iteration, const Action& action)> before_action;
};

// One rank in one iteration. Times are seconds since the iteration began (all ranks together).
struct RankIteration {
  double busy_s = 0;                 // compute actions, wall clock
  double busy_cpu_s = 0;             // the rank thread's CPU time in them (less than busy_s when the OS ran
                                     // other threads on its core meanwhile)
  double end_s = 0;                  // the optimizer step done
  double activation_peak_bytes = 0;
  std::vector<SimEvent> events;      // compute, send and receive lanes, as the simulator reports them
  std::vector<MemorySample> memory;  // activation bytes in use after each change
};

struct IterationRecord {
  int iteration = 0;
  bool warmup = false;
  double step_time_s = 0;  // the last rank's optimizer step done
  std::vector<RankIteration> ranks;
};

// Records are per worker (RunOptions::replicas): with one replica, per rank.
struct RunResult {
  std::vector<IterationRecord> iterations;     // warm-up ones first
  std::vector<double> activation_peak_bytes;   // per worker, over the whole run
};

// Ranks as threads: a rank stayed inside one action (or a wait) for longer than the timeout. A thread cannot
// be stopped, so the run ended without it: its thread is left running, detached, and may still use the
// backend and the transport the caller gave. The caller keeps both alive (leaks them) and ends the process
// soon without running destructors the thread may use: the CLI prints the error, then leaves by std::_Exit
// while rank_threads_left_running() (executor/stall_watch.hpp) is not 0.
class RankStalled : public Error {
 public:
  explicit RankStalled(const std::string& message) : Error(ErrorKind::Runtime, message) {}
};

// BadInput naming --schedule when `name` runs more than one copy of the model (bidirectional DualPipe): the
// executor holds one copy of each stage's layers per rank. run_schedule checks it too.
void check_runs_one_copy(const std::string& name, int copies);

// Validates the schedule (lowering it first when it is compute-only; BadInput before anything runs), then
// runs warmup + iterations iterations. A rank that throws, or a wait longer than timeout_s, stops every rank
// and throws Runtime "rank <r> failed at <action>: <reason>"; a rank that stalls throws RankStalled
// "rank <r> stalled at <action>: it did not return within <timeout> s; the run ended without it" a quarter
// second after the run stopped, at the earliest timeout_s after it entered the action (StallWatch).
// `transport` null: threads in this process.
RunResult run_schedule(const Schedule& schedule, Backend& backend, const RunOptions& options = {},
                       Transport* transport = nullptr);

// A run that failed in another process, which reports the error; this one has the same text and stays quiet.
class RunFailedElsewhere : public Error {
 public:
  explicit RunFailedElsewhere(const std::string& message) : Error(ErrorKind::Runtime, message) {}
};

// Ranks as processes: this process runs worker group.rank() of the schedule, whose rank count times the
// replicas must be the group's size (BadInput otherwise). Iterations start and optimizer steps happen together across the group
// (its barrier); every rank's records and activation peak are gathered at process 0, whose result is the
// whole run's; another process's result holds its own rank's only (the others' stay empty, step times are
// its rank's). Errors as above, plus RunFailedElsewhere when another process failed first. On any error the
// caller ends the job (end_job_now): the other processes may still be waiting.
RunResult run_schedule(const Schedule& schedule, Backend& backend, const RunOptions& options, ProcessGroup& group);

// The same with several ranks per process, each a thread here: this process runs `local_ranks` (ascending,
// its share of the schedule's ranks; together the processes hold each rank once) and moves tensors over
// `transport` (one that reaches every rank, such as NCCL's). The local ranks meet each other first and then,
// through one of them, the group. Process 0 gathers every process's ranks. The overload above is this one
// with the process's own rank and the group's transport.
RunResult run_schedule(const Schedule& schedule, Backend& backend, const RunOptions& options, ProcessGroup& group,
                       Transport& transport, const std::vector<int>& local_ranks);

}  // namespace pw
