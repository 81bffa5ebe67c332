#include "schedules/families.hpp"

namespace pw {

// Megatron-Core's interleaved 1F1B with --overlap-moe-expert-parallel-comm (combined_1f1b_schedule_for_
// interleaved_pipelining in megatron/core/pipeline_parallel/schedules.py, with --delay-wgrad-compute): one
// more warm-up forward than interleaved ("to ensure the forward and backward computations are independent in
// all 1f1b steps"), then each step's forward and backward as one F&B composite, whose expert-parallel
// all-to-alls run while the other half computes. Megatron needs --vpp with pp > 1, as this does (v >= 2).
Schedule make_interleaved_overlap(const ScheduleSpec& spec) {
  Schedule s = interleaved_order(spec, true);
  s.name = spec.name;
  return s;
}

}  // namespace pw
