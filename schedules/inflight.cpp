#include "schedules/inflight.hpp"

#include <algorithm>

#include "schedules/parts.hpp"

namespace pw {

std::vector<int> peak_in_flight(const Schedule& s, HeldUntil until) {
  const Part frees = until == HeldUntil::LastBackward ? Part::W : Part::B;
  std::vector<int> peaks;
  for (const auto& list : s.ranks) {
    int held = 0, peak = 0;
    for (const Action& a : list) {
      // Within a composite the forward allocates before the backward frees (both are live at once).
      for (const WorkPart& part : parts_of(a))
        if (part.part == Part::F) peak = std::max(peak, ++held);
      for (const WorkPart& part : parts_of(a))
        if (part.part == frees) --held;
    }
    peaks.push_back(peak);
  }
  return peaks;
}

}  // namespace pw
