#pragma once
// Schedule generators: each produces the compute-only IR (lower() adds communication).
#include <string>
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

// Error messages name the CLI flags: --schedule, --pp, --microbatches, --vpp,
// --group-size and --max-pending.
struct ScheduleSpec {
  std::string name;        // "gpipe", "1f1b", "interleaved", "zb-h1"
  int ranks = 1;           // p
  int microbatches = 1;    // m
  int chunks = 1;          // v (interleaved; must be 1 for the others)
  int group_size = 0;      // interleaved micro-batch group size N (0: p; p <= N <= m; N = m is breadth-first)
  int max_pending = 0;     // zero-bubble: maximum pending backward passes (0: the generator's own default)
};

// The families, all compute-only with loop placement:
//   gpipe        all F, then all BW, on every rank.
//   1f1b         PipeDream-flush: min(p - r - 1, m) warm-up F on rank r, then F/BW pairs, then BW.
//   interleaved  Megatron's depth-first interleaved 1F1B; v >= 2 chunks per rank (stage c p + r),
//                m >= p and the last group of N full or at least p micro-batches (Megatron's rule).
//   zb-h1        zero-bubble H1: 1F1B with B and W split, W deferred by r steps on rank r; at most p
//                micro-batches pending W on each rank (max_pending must be 0 or p).

std::vector<std::string> schedule_names();
// Checks the spec's constraints up front (throws BadInput naming the constraint and the fix),
// then builds the schedule.
Schedule make_schedule(const ScheduleSpec& spec);
// Number of model chunks per rank the named schedule uses for a given --vpp (1 for gpipe/1f1b/zb-h1).
int chunks_per_rank(const std::string& name, int vpp);

}  // namespace pw
