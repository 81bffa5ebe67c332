#include <span>

#include "executor/message_wire.hpp"
#include "executor/record_wire.hpp"
#include "executor/sleep_backend.hpp"
#include "fuzz_targets.hpp"
#include "read_or_refuse.hpp"
#include "wire_run.hpp"

namespace pw::fuzz {

std::vector<IterationRecord> wire_run() {
  std::vector<IterationRecord> run(2);
  for (IterationRecord& it : run) it.ranks.resize(4);
  return run;
}

Clock::time_point wire_since() { return Clock::time_point(std::chrono::hours(1)); }

void fuzz_message_wire(const std::uint8_t* data, std::size_t size) {
  // The sleep backend rebuilds tensors as the CPU backend does (Backend::tensor_from_wire).
  static const SleepBackend backend({});
  read_or_refuse([&] {
    message_from_wire(std::as_bytes(std::span(data, size)), backend, wire_since(), 1);
  });
}

void fuzz_record_wire(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] {
    std::vector<IterationRecord> run = wire_run();
    rank_records_from_wire(std::as_bytes(std::span(data, size)), run);
  });
}

}  // namespace pw::fuzz
