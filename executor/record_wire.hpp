#pragma once
// One rank's records of a run as bytes, so that process 0 can gather every process's rank (both ends run the
// same build, so numbers travel as they lie in memory).
#include <cstddef>
#include <span>
#include <vector>

#include "executor/runtime.hpp"

namespace pw {

// Rank `rank`'s entry of every iteration, and its activation peak over the run.
std::vector<std::byte> rank_records_to_wire(int rank, const std::vector<IterationRecord>& iterations, double peak_bytes);

// Writes what rank_records_to_wire wrote into `iterations` (sized for every rank already) and returns the rank
// and its peak. Runtime error for bytes that do not fit the run (another iteration count, a rank out of range,
// a short message).
struct RankRecordsHeader {
  int rank = 0;
  double peak_bytes = 0;
};
RankRecordsHeader rank_records_from_wire(std::span<const std::byte> wire, std::vector<IterationRecord>& iterations);

}  // namespace pw
