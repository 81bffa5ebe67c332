#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

// Looped breadth-first (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism"; Megatron's
// interleaving with micro-batch group size m): every micro-batch runs through chunk 0 before any
// runs through chunk 1, so a rank holds nearly all m micro-batches of every chunk but the last one,
// and its fill and drain shrink by v like interleaved 1F1B's.
Schedule make_bfs(const ScheduleSpec& spec) {
  if (spec.chunks < 2)
    throw_bad_input("--vpp: bfs needs at least 2 chunks per rank, got {}; use --vpp 2 or more, or --schedule gpipe",
                    spec.chunks);
  if (spec.microbatches < spec.ranks)
    throw_bad_input("--microbatches: bfs needs at least as many micro-batches as --pp ({}), got {}; use {} or more",
                    spec.ranks, spec.microbatches, spec.ranks);
  ScheduleSpec interleaved = spec;
  interleaved.group_size = spec.microbatches;
  Schedule s = make_interleaved(interleaved);
  s.name = spec.name;
  return s;
}

}  // namespace pw
