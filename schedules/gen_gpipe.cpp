#include "schedules/families.hpp"

namespace pw {

// Fill, then drain: every micro-batch's forward before any backward.
Schedule make_gpipe(const ScheduleSpec& spec) {
  Schedule s = empty_schedule(spec, 1);
  for (int r = 0; r < spec.ranks; ++r) {
    auto& list = s.ranks[static_cast<size_t>(r)];
    for (int i = 0; i < spec.microbatches; ++i) list.push_back(Action{Op::F, r, i});
    for (int i = 0; i < spec.microbatches; ++i) list.push_back(Action{Op::BW, r, i});
  }
  return s;
}

}  // namespace pw
