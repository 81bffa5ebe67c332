#include "profiler/cpu_profile_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/kept_bytes.hpp"
#include "core/layer_work.hpp"
#include "core/units.hpp"
#include "executor/cpu_layers.hpp"
#include "profiler/cpu_profiler.hpp"

namespace pw {
namespace {

constexpr double kFloatBytes = 4;

std::string sizes_text(const std::vector<int>& sizes) {
  std::string out;
  for (int b : sizes) out += fmt::format("{}{}", out.empty() ? "" : ", ", b);
  return out;
}

}  // namespace

std::vector<WorkEstimate> cpu_profile_estimate(const Model& model, const CpuProfileRequest& request, const CoreSpeed& core) {
  check_cpu_model(model);
  const Model one = one_block_per_kind(model);
  const TransformerConfig& c = *one.transformer;
  const int seq = request.seq_len > 0 ? request.seq_len : model.default_seq_len();
  const ProfileOptions& o = request.options;
  // Runs the repetition rules make at least (profiler/repeat.hpp): the warm-up and one untimed run a round,
  // then timed ones until both the minimum count and the minimum time are reached (or the maximum count).
  const double untimed = std::max(0, o.warmup) + (o.rounds > 1 ? o.rounds : 0);
  const double timed = std::max(0, o.min_repetitions);
  const auto item_seconds = [&](double run_s) {
    return untimed * run_s + std::max(timed * run_s, std::min(o.min_time_s, std::max(0, o.max_repetitions) * run_s));
  };
  double seconds = 0;

  double parameters = 0, inputs = 0, kept = 0, flops = 0;
  for (const Layer& layer : one.layers) parameters += layer_work(one, layer, Workload{}).parameters;
  for (int b : request.micro_batch_sizes) {
    Workload w;
    w.micro_batch_size = std::max(1, b);
    w.seq_len = seq;
    w.memory = MemoryAccounting::CpuFloat32;
    const double tokens = static_cast<double>(w.micro_batch_size) * seq;
    for (const Layer& layer : one.layers) {
      const LayerWork lw = layer_work(one, layer, w);
      const double run_flops = lw.forward.flops() + lw.backward_input.flops() + lw.backward_weight.flops();
      flops += run_flops;
      seconds += item_seconds(run_flops / core.flops);
      inputs += 2 * tokens * c.hidden * kFloatBytes;  // x and dy
      const KeptBytes k = cpu_kept_bytes(c, layer.kind, layer.block, w.micro_batch_size, seq, Recompute::None);
      kept = std::max(kept, k.after_forward + k.after_backward + k.output);
    }
  }
  const std::string layers = fmt::format("the embedding, one block and the head of {} at micro-batch size{} {} and "
                                         "{} tokens",
                                         model.name, request.micro_batch_sizes.size() == 1 ? "" : "s",
                                         sizes_text(request.micro_batch_sizes), seq);
  const std::string fix = "lower --seq-len or --micro-batch-size, or profile with --backend cuda";
  WorkEstimate memory;
  memory.work = fmt::format("the float32 tensors of {} ({:.3g} parameters with their gradients)", layers, parameters);
  memory.bytes = 2 * kFloatBytes * parameters + inputs + kept + kOptimizerStateCapBytes + kCacheEvictionBytes;
  memory.fix = fix;
  WorkEstimate time;
  time.work = fmt::format("initialising {:.3g} parameters and {} or more runs of F, B and W of {} ({:.3g} FLOPs a "
                          "run, at the {} of one core here)",
                          parameters, untimed + timed, layers, flops, format_flops(core.flops));
  time.seconds = parameters / core.normals + seconds;
  time.fix = fix;
  return {memory, time};
}

}  // namespace pw
