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

  // A pass per micro-batch size over pass_copies copies of the blocks (profile_cpu_layers), each holding its
  // model's weights and gradients and every layer's kept tensors at once.
  double parameters = 0, inputs = 0, kept = 0, flops = 0;
  int most_copies = 1;
  for (int b : request.micro_batch_sizes) {
    const int copies = pass_copies(model, b, seq);
    most_copies = std::max(most_copies, copies);
    const Model pass = blocks_per_kind_copies(model, copies);
    Workload w;
    w.micro_batch_size = std::max(1, b);
    w.seq_len = seq;
    w.memory = MemoryAccounting::CpuFloat32;
    const double tokens = static_cast<double>(w.micro_batch_size) * seq;
    double pass_parameters = 0, pass_kept = 0, pass_flops = 0;
    for (const Layer& layer : pass.layers) {
      const LayerWork lw = layer_work(pass, layer, w);
      pass_parameters += lw.parameters;
      pass_flops += lw.forward.flops() + lw.backward_input.flops() + lw.backward_weight.flops();
      const KeptBytes k =
          cpu_kept_bytes(*pass.transformer, layer.kind, layer.block, w.micro_batch_size, seq, Recompute::None);
      pass_kept += k.after_forward + k.after_backward + k.output;
    }
    parameters = std::max(parameters, pass_parameters);
    kept = std::max(kept, pass_kept);
    flops += pass_flops;
    seconds += item_seconds(pass_flops / core.flops);
    inputs += 2 * tokens * c.hidden * kFloatBytes;  // x and dy
  }
  const std::string blocks =
      most_copies == 1 ? std::string("one block") : fmt::format("{} copies of the blocks", most_copies);
  const std::string layers = fmt::format("the embedding, {} and the head of {} at micro-batch size{} {} and {} tokens",
                                         blocks,
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
