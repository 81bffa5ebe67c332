#pragma once
// The fuzz targets: each feeds its bytes to one of pipewright's readers of outside input (the loaders of
// files and the decoders of the process-to-process wire). Bad input is the expected outcome, so a pw::Error
// leaving the reader is swallowed; any other exception (nlohmann's, std::bad_alloc, std::out_of_range ...)
// propagates, and a crash stays a crash. libFuzzer's entry point (fuzz_main.cpp) and the replay test
// (replay_test.cpp) call the same functions, so every input that ever broke a reader replays in the
// ordinary test suite.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pw::fuzz {

void fuzz_model_json(const std::uint8_t* data, std::size_t size);
void fuzz_hf_config(const std::uint8_t* data, std::size_t size);
void fuzz_cluster(const std::uint8_t* data, std::size_t size);
void fuzz_plan(const std::uint8_t* data, std::size_t size);
void fuzz_profile(const std::uint8_t* data, std::size_t size);
void fuzz_calibration(const std::uint8_t* data, std::size_t size);
void fuzz_schedule_json(const std::uint8_t* data, std::size_t size);
void fuzz_schedule_csv(const std::uint8_t* data, std::size_t size);
void fuzz_run_record(const std::uint8_t* data, std::size_t size);
void fuzz_run_trace(const std::uint8_t* data, std::size_t size);
void fuzz_message_wire(const std::uint8_t* data, std::size_t size);
void fuzz_record_wire(const std::uint8_t* data, std::size_t size);

struct FuzzTarget {
  std::string name;  // as in tests/fuzz/seeds.txt, tests/fuzz/regressions/<name>/ and scripts/fuzz.sh
  void (*run)(const std::uint8_t* data, std::size_t size);
};

const std::vector<FuzzTarget>& fuzz_targets();

}  // namespace pw::fuzz
