#pragma once
// Schedule generators: each produces the compute-only IR (lower() adds communication).
#include <string>
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

struct ScheduleSpec {
  std::string name;        // "gpipe", "1f1b", "interleaved", "zb-h1"
  int ranks = 1;           // p
  int microbatches = 1;    // m
  int chunks = 1;          // v (interleaved)
  int group_size = 0;      // interleaved micro-batch group size N (0: p)
  int max_pending = 0;     // zero-bubble: maximum pending backward passes (0: the generator's own default)
};

std::vector<std::string> schedule_names();
// Checks the spec's constraints up front (throws BadInput naming the constraint and the fix),
// then builds the schedule.
Schedule make_schedule(const ScheduleSpec& spec);
// Number of model chunks per rank the named schedule uses for a given --vpp (1 for gpipe/1f1b/zb-h1).
int chunks_per_rank(const std::string& name, int vpp);

}  // namespace pw
