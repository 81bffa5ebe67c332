#include "executor/machine_load.hpp"

#include <algorithm>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

namespace pw {
namespace {

std::string load_text(const MachineLoad& load) {
  const std::string cores = fmt::format("{} core{}", load.cores, load.cores == 1 ? "" : "s");
  if (load.load_average < 0) return fmt::format("load average unknown, {}", cores);
  return fmt::format("load average {:.1f} on {}", load.load_average, cores);
}

}  // namespace

double MachineLoad::other_load() const {
  if (load_average < 0) return -1;
  return std::max(0.0, load_average - std::min(ranks, cores));
}

MachineLoad machine_load_of(const RunResult& result, double load_average, int cores) {
  MachineLoad load;
  load.load_average = load_average;
  load.cores = cores;
  std::vector<double> wall, cpu;
  for (const IterationRecord& it : result.iterations) {
    if (it.warmup) continue;
    wall.resize(std::max(wall.size(), it.ranks.size()));
    cpu.resize(wall.size());
    for (size_t r = 0; r < it.ranks.size(); ++r) {
      wall[r] += it.ranks[r].busy_s;
      cpu[r] += it.ranks[r].busy_cpu_s;
    }
  }
  load.ranks = static_cast<int>(wall.size());
  for (size_t r = 0; r < wall.size(); ++r) {
    load.compute_wall_s += wall[r];
    load.compute_cpu_s += cpu[r];
    if (!(wall[r] > 0)) continue;
    const double share = cpu[r] / wall[r];
    if (load.lowest_rank < 0 || share < load.lowest_rank_cpu_share) {
      load.lowest_rank = static_cast<int>(r);
      load.lowest_rank_cpu_share = share;
    }
  }
  return load;
}

LoadVerdict judge_machine_load(const MachineLoad& load, bool cpu_compute, int pipeline_ranks, bool turns_predicted) {
  LoadVerdict v;
  if (!cpu_compute || !(load.compute_wall_s > 0)) {
    v.line = fmt::format("{}; not judged without CPU compute (sleep compute, GPU kernels)", load_text(load));
    return v;
  }
  v.judged = true;
  // Ranks that outnumber the cores take turns on them; where the prediction has them do so, a short share is
  // theirs, and only other programs make the machine shared.
  const bool own_turns = turns_predicted && load.ranks > load.cores;
  const bool short_of_cores = !own_turns && load.cpu_share() < kSharedBelowCpuShare;
  const bool others_busy = load.other_load() > kSharedAboveOtherLoadPerCore * load.cores;
  v.shared = short_of_cores || others_busy;
  v.line = fmt::format("ranks ran {:.0f}% of their compute time on a core", load.cpu_share() * 100);
  if (load.lowest_rank >= 0 && load.ranks > 1)
    v.line += fmt::format(" ({} {:.0f}%)",
                          pipeline_ranks > 0 && load.ranks > pipeline_ranks
                              ? fmt::format("rank {} of replica {}", load.lowest_rank % pipeline_ranks,
                                            load.lowest_rank / pipeline_ranks)
                              : fmt::format("rank {}", load.lowest_rank),
                          load.lowest_rank_cpu_share * 100);
  v.line += "; " + load_text(load);
  if (own_turns) v.line += fmt::format(", {} ranks taking turns on them as predicted", load.ranks);
  if (!v.shared) return v;
  if (short_of_cores && load.ranks > load.cores)
    v.line += fmt::format(": {} ranks shared {} core{}, measured times are not comparable with the prediction",
                          load.ranks, load.cores, load.cores == 1 ? "" : "s");
  else if (short_of_cores)
    v.line += ": the machine was shared, measured times are not comparable with the prediction";
  else
    v.line += fmt::format(": other programs kept {:.1f} cores busy, the machine was shared, measured times are not "
                          "comparable with the prediction",
                          load.other_load());
  return v;
}

nlohmann::json machine_load_json(const MachineLoad& load, const LoadVerdict& verdict) {
  return {{"judged", verdict.judged},
          {"shared", verdict.shared},
          {"verdict", verdict.line},
          {"compute_cpu_share", load.cpu_share()},
          {"shared_below_cpu_share", kSharedBelowCpuShare},
          {"other_load", load.other_load() >= 0 ? nlohmann::json(load.other_load()) : nlohmann::json()},
          {"shared_above_other_load_per_core", kSharedAboveOtherLoadPerCore},
          {"compute_wall_s", load.compute_wall_s},
          {"compute_cpu_s", load.compute_cpu_s},
          {"lowest_rank", load.lowest_rank},
          {"lowest_rank_cpu_share", load.lowest_rank_cpu_share},
          {"load_average_1m", load.load_average >= 0 ? nlohmann::json(load.load_average) : nlohmann::json()},
          {"cores", load.cores}};
}

double read_load_average(const std::string& path) {
  std::ifstream in(path);
  double one_minute = -1;
  if (!(in >> one_minute) || !(one_minute >= 0)) return -1;
  return one_minute;
}

int usable_cores() {
  const std::vector<int> ids = usable_core_ids();
  return ids.empty() ? online_cores() : static_cast<int>(ids.size());
}

std::vector<int> usable_core_ids() {
  std::vector<int> ids;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return ids;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) ids.push_back(c);
  return ids;
}

bool bind_this_thread(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

int online_cores() { return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)); }

}  // namespace pw
