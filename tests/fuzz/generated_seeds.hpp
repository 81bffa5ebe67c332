#pragma once
// Seeds made by pipewright's own writers, for the targets whose inputs no file in examples/ or tests/golden/
// holds: the wire (its format is whatever this build writes) and schedules (one per generator family).
#include <cstddef>
#include <string>
#include <vector>

namespace pw::fuzz {

struct NamedSeed {
  std::string name;  // file name in a corpus folder
  std::vector<std::byte> bytes;
};

// For message_wire, record_wire, schedule_json and schedule_csv; empty for the other targets.
std::vector<NamedSeed> generated_seeds(const std::string& target);

}  // namespace pw::fuzz
