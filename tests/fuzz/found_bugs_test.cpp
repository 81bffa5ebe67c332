// Bugs the fuzzers found outside issue 12's list, with the exact refusal that replaced each (the input itself
// replays from tests/fuzz/regressions/, where the sanitizer build catches the undefined behaviour).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "executor/message_wire.hpp"
#include "executor/sleep_backend.hpp"
#include "wire_run.hpp"

TEST_CASE("fuzz finding: a message's send time of 2^63 - 1 ns is refused, not added to the clock") {
  // message_wire's fixed front: iteration, op, stage, micro-batch (int32), flow id, send time (int64), has_tensor,
  // padding (int32); the send time sits at byte 24.
  std::vector<std::byte> wire(40, std::byte{0});
  const std::int64_t sent_ns = INT64_MAX;
  std::memcpy(wire.data() + 24, &sent_ns, sizeof sent_ns);
  const pw::SleepBackend backend({});
  CHECK_THROWS_WITH(pw::message_from_wire(wire, backend, pw::fuzz::wire_since(), 3),
                    "a message from rank 3 was sent 9223372036854775807 ns from its sender's last barrier, more than a "
                    "year; the processes run different builds?");
}
