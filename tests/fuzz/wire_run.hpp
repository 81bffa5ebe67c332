#pragma once
// What the wire targets decode into.
#include <vector>

#include "executor/runtime.hpp"
#include "executor/transport.hpp"

namespace pw::fuzz {

// The run a rank's records arrive for: two iterations of four ranks.
std::vector<IterationRecord> wire_run();

// The point the message wire's send times count from (fixed, so that a replay reads as the fuzzer's run did).
Clock::time_point wire_since();

}  // namespace pw::fuzz
