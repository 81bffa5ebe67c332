#pragma once
// Whether a run had the machine to itself. A rank that computes on a core of its own spends its compute
// time on the CPU; on a shared machine the OS runs other programs on that core meanwhile and the wall
// clock measures them too, so the measured times are not comparable with a prediction that assumes a
// device per rank. The judgement: the rank threads' CPU time over the wall time of their compute actions
// (the measured iterations, all ranks together), against kSharedBelowCpuShare; the load average and the
// cores say by what.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/runtime.hpp"

namespace pw {

// Below this share of their compute time on a core, the ranks did not have a core each.
inline constexpr double kSharedBelowCpuShare = 0.8;
// Ranks can get their whole core and still run slow when other programs keep the machine's other cores (and
// so its caches and memory bandwidth) busy, as a niced build beside the run does: a load average above the
// ranks' own by more than this much per core says so.
inline constexpr double kSharedAboveOtherLoadPerCore = 0.25;

struct MachineLoad {
  double compute_wall_s = 0;  // every rank's compute actions over the measured iterations, wall clock
  double compute_cpu_s = 0;   // the rank threads' CPU time in them
  int lowest_rank = -1;       // the rank with the least CPU time per wall time, -1 without compute
  double lowest_rank_cpu_share = 0;
  int ranks = 0;
  double load_average = 0;    // /proc/loadavg over the last minute; negative when unknown
  int cores = 0;              // the cores this process may run on

  double cpu_share() const { return compute_wall_s > 0 ? compute_cpu_s / compute_wall_s : 0; }
  // The load average less what the ranks themselves make (one per core at most); negative when unknown.
  double other_load() const;
};

struct LoadVerdict {
  bool judged = false;  // false: there was no CPU compute to judge by (sleep compute, GPU kernels)
  bool shared = false;
  // "ranks ran 38% of their compute time on a core; load average 5.1 on 2 cores: the machine was shared,
  // measured times are not comparable with the prediction"
  std::string line;
};

// The measured iterations' compute of every rank in `result` (busy_s, busy_cpu_s), with the load average
// and the cores given.
MachineLoad machine_load_of(const RunResult& result, double load_average, int cores);

// The verdict on a run whose ranks computed on CPUs (`cpu_compute`), or the load alone otherwise.
// `pipeline_ranks`: with data-parallel replicas, the records are per worker (replica d's rank r at
// d x pipeline_ranks + r), named so; 0: every record is a rank.
// `turns_predicted`: the prediction has ranks that outnumber the cores take turns on them (SharedCores), so
// only other programs' load makes the machine shared.
LoadVerdict judge_machine_load(const MachineLoad& load, bool cpu_compute, int pipeline_ranks = 0,
                               bool turns_predicted = false);

// As `run --json` writes it under "machine_load": the verdict (judged, shared, its line) and the figures.
nlohmann::json machine_load_json(const MachineLoad& load, const LoadVerdict& verdict);

// The first field of /proc/loadavg (`path`), or -1 when it cannot be read.
double read_load_average(const std::string& path = "/proc/loadavg");
// The cores this process may run on (its affinity mask), at least 1: what ranks as its threads share.
int usable_cores();
// Those cores' ids, in order; empty where the OS does not say.
std::vector<int> usable_core_ids();
// Binds the calling thread to `core`; false where the OS refuses.
bool bind_this_thread(int core);
// The machine's online cores, at least 1: what ranks as processes share (a launcher binds each process
// to its own cores, so one process's mask says nothing about the others').
int online_cores();

}  // namespace pw
