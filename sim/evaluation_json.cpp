#include "sim/evaluation_json.hpp"

#include <cmath>

namespace pw {

nlohmann::ordered_json rank_stats_json(const RankStats& r) {
  return {{"rank", r.rank},
          {"busy_s", r.busy_s},
          {"idle_s", r.idle_s},
          {"activation_peak_bytes", r.activation_peak_bytes},
          {"model_state_bytes", r.model_state_bytes},
          {"working_bytes", r.working_bytes},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"peak_inflight_microbatches", r.peak_inflight_microbatches}};
}

nlohmann::ordered_json metrics_json(const Metrics& m) {
  using ojson = nlohmann::ordered_json;
  return {{"step_time_s", m.step_time_s},
          {"bubble_fraction", m.bubble_fraction},
          {"exposed_dp_comm_s", m.exposed_dp_comm_s},
          {"expert_all_to_all_s", m.expert_all_to_all_s},
          {"host_wait_s", m.host_wait_s},
          {"tokens_per_iteration", m.tokens_per_iteration},
          {"throughput_tokens_per_s", m.throughput_tokens_per_s},
          {"model_tflops_per_gpu", m.model_tflops_per_gpu},
          {"hardware_tflops_per_gpu", m.hardware_tflops_per_gpu},
          {"mfu", m.mfu},
          {"hfu", m.hfu},
          {"peak_memory_bytes", m.peak_memory_bytes},
          {"memory_limit_bytes", std::isfinite(m.memory_limit_bytes) ? ojson(m.memory_limit_bytes) : ojson(nullptr)},
          {"fits", m.overflows.empty()}};
}

}  // namespace pw
