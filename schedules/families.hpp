#pragma once
// One builder per schedule family (gen_<family>.cpp). make_schedule() has already checked
// the spec's common fields (ranks and micro-batches at least 1) and filled the defaults.
#include "schedules/generators.hpp"

namespace pw {

Schedule make_gpipe(const ScheduleSpec& spec);
Schedule make_1f1b(const ScheduleSpec& spec);
Schedule make_interleaved(const ScheduleSpec& spec);  // checks --vpp and --microbatches itself
Schedule make_zb_h1(const ScheduleSpec& spec);

// A compute-only schedule with loop placement and empty per-rank lists.
Schedule empty_schedule(const ScheduleSpec& spec, int chunks);

}  // namespace pw
