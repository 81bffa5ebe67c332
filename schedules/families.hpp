#pragma once
// One builder per schedule family (gen_<family>.cpp). make_schedule() has already checked
// the spec's common fields (ranks and micro-batches at least 1, --vpp for the family) and filled the
// defaults.
#include "schedules/generators.hpp"

namespace pw {

Schedule make_gpipe(const ScheduleSpec& spec);
Schedule make_1f1b(const ScheduleSpec& spec);
Schedule make_interleaved(const ScheduleSpec& spec);  // checks --vpp and --microbatches itself
Schedule make_bfs(const ScheduleSpec& spec);
Schedule make_interleaved_overlap(const ScheduleSpec& spec);  // interleaved's checks
// Interleaved 1F1B's order; `combined`: Megatron-Core's combined 1F1B (one more warm-up forward, then each
// step's forward and backward as one F&B composite).
Schedule interleaved_order(const ScheduleSpec& spec, bool combined);
Schedule make_zero_bubble(const ScheduleSpec& spec);  // zb-h1 and zb-h2; checks --max-pending
Schedule make_zb_v(const ScheduleSpec& spec);
Schedule make_v_half(const ScheduleSpec& spec);
Schedule make_v_min(const ScheduleSpec& spec);
Schedule make_dualpipe(const ScheduleSpec& spec);     // checks --pp and --microbatches
Schedule make_dualpipev(const ScheduleSpec& spec);    // checks --microbatches
Schedule make_zb_auto(const ScheduleSpec& spec);      // checks the stage times and memory limits

// A compute-only schedule with loop placement and empty per-rank lists.
Schedule empty_schedule(const ScheduleSpec& spec, int chunks);
// The same with V placement: rank r holds stages r and 2p - 1 - r.
Schedule empty_v_schedule(const ScheduleSpec& spec);

}  // namespace pw
