#pragma once
// The CPU profiler: times each distinct layer's F, B and W on the real float32 kernels (one thread), the
// optimizer step, and the rank-to-rank transfer of the thread transport over message sizes.
#include <vector>

#include "core/model.hpp"
#include "profiler/profile.hpp"
#include "profiler/repeat.hpp"

namespace pw {

// Median and p10/p90 of `samples` (which it sorts).
PhaseTiming timing_of(std::vector<double>& samples);

// The embedding, one block of each kind and the head of `model` at each micro-batch size: F, B (keeping the
// weight gradient work) and W timed apart, in passes as a pipeline stage runs its layers (F of every layer,
// then B in reverse, then W in reverse) over pass_copies copies of the blocks, with the bytes F keeps, B keeps
// for W, and the output's bytes; for a block also the softmax rebuild that selective recomputation adds to B.
// BadInput for models the CPU backend cannot run.
std::vector<LayerProfile> profile_cpu_layers(const Model& model, const std::vector<int>& micro_batch_sizes, int seq_len,
                                             const ProfileOptions& options);

// The most Adam state (value, gradient and both moments) the optimizer step is timed over.
inline constexpr double kOptimizerStateCapBytes = 256.0 * 1024 * 1024;
// Bytes written before each timed optimizer step: more than a core's share of the caches on the machines
// measured, so the step finds its state in memory, as in a run.
inline constexpr double kCacheEvictionBytes = 64.0 * 1024 * 1024;

// The copies of the model's blocks (one of each kind a copy) a profile pass runs at this micro-batch size:
// enough that the others' weights, gradients and activations (kCacheEvictionBytes) push a block's out of the
// caches between two of its runs, as a run's other layers do, and no more than the model has.
int pass_copies(const Model& model, int micro_batch_size, int seq_len);

// Seconds per parameter of one Adam step, over the parameters of as many blocks as the model has (up to
// kOptimizerStateCapBytes of state), each step after kCacheEvictionBytes of writes.
double profile_cpu_optimizer(const Model& model, const ProfileOptions& options);

// One-way times between two rank threads over the thread transport (the median of `repetitions` round
// trips, halved) for each message size, and the fit time = latency + bytes / bandwidth.
LinkProfile profile_thread_link(const std::vector<double>& sizes_bytes, int repetitions);

// What a rank thread that slept on its receive adds to a hand-over when the OS wakes it on an idle core, past
// the link's own time: the median one-way time of a kWakeupMessageBytes message to a receiver bound to
// another core that sleeps at once, less that of the thread link. With more ranks than cores no receiver
// spins, and a hand-over to a rank with a free core costs this (MachineInfo::wakeup_s). 0 on one core.
inline constexpr double kWakeupMessageBytes = 1024;
inline constexpr int kWakeupRepetitions = 200;
double profile_thread_wakeup(int repetitions);

// What a turn handed between rank threads on one core costs (executor/core_turns.hpp, MachineInfo::handover_s):
// two ranks sharing one turn pass a kWakeupMessageBytes message back and forth, each giving its turn up to the
// other as it waits for the reply; the median one-way time, less that of the thread link.
double profile_turn_handover(int repetitions);

// 1 KiB, 4 KiB, ..., 64 MiB.
std::vector<double> default_link_sizes();


// "cpu: <model name> (<cores> cores)" from /proc/cpuinfo where there is one.
MachineInfo cpu_machine_info();

// What a whole CPU profile measures and how long it tries.
struct CpuProfileRequest {
  std::vector<int> micro_batch_sizes{1};
  int seq_len = 0;  // 0: the model's
  ProfileOptions options;
  std::vector<double> link_sizes = default_link_sizes();
  int link_repetitions = 5;
};

// Layers, optimizer and the thread link, with the tool and the machine filled in.
Profile profile_cpu(const Model& model, const CpuProfileRequest& request);

// For `run` without --profile: one micro-batch shape, one warm-up, 5 to 200 repetitions or 20 ms per layer,
// and the link at 1 KiB to 1 MiB (where stage outputs of CPU-sized models fall) with 5 round trips: well
// under a second for the tiny examples.
CpuProfileRequest quick_profile_request(int micro_batch_size, int seq_len);

}  // namespace pw
