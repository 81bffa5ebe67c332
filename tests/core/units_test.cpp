#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/units.hpp"

using namespace pw;

TEST_CASE("figures carry units with three significant digits") {
  CHECK(format_seconds(1.23456) == "1.235 s");
  CHECK(format_seconds(0.0125) == "12.50 ms");
  CHECK(format_seconds(0.25) == "250.0 ms");
  CHECK(format_seconds(8.3e-4) == "830 us");
  CHECK(format_seconds(0) == "0 s");
  CHECK(format_bytes(79.2e9) == "79.2 GB");
  CHECK(format_bytes(17) == "17 B");
  CHECK(format_bytes(512e6) == "512 MB");
  CHECK(format_bytes(12000) == "12.0 kB");
  CHECK(format_rate(4.5e11) == "450 GB/s");
  CHECK(format_flops(312e12) == "312 TFLOP/s");
  CHECK(format_tflops(339.54e12) == "339.5 TFLOP/s");
  CHECK(format_tflops(1e12) == "1.0 TFLOP/s");
  CHECK(format_tflops(41.23e9) == "41.2 GFLOP/s");
  CHECK(format_tflops(0) == "0 FLOP/s");
  CHECK(format_percent(0.4567) == "45.7%");
}

TEST_CASE("errors carry a kind that maps to the exit code") {
  try {
    throw_bad_input("--tp: {} is not a power of two; use 1, 2, 4 or 8", 3);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) == "--tp: 3 is not a power of two; use 1, 2, 4 or 8");
    CHECK(exit_code(e.kind()) == 2);
  }
  CHECK(exit_code(ErrorKind::Runtime) == 1);
}
