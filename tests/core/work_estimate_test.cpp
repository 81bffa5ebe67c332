#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "core/machine_memory.hpp"
#include "core/work_estimate.hpp"

using namespace pw;

TEST_CASE("mem_available_bytes: the MemAvailable line of /proc/meminfo, in bytes") {
  CHECK(mem_available_bytes("MemTotal:       32768000 kB\nMemFree:         1000 kB\nMemAvailable:   22394676 kB\n") ==
        22394676.0 * 1024);
  CHECK_FALSE(mem_available_bytes("MemTotal:       32768000 kB\n").has_value());
  CHECK_FALSE(mem_available_bytes("MemAvailable:   lots\n").has_value());
  CHECK(available_memory_bytes() > 0);
}

TEST_CASE("with_commas, format_count and format_duration") {
  CHECK(with_commas(0) == "0");
  CHECK(with_commas(999) == "999");
  CHECK(with_commas(1000) == "1,000");
  CHECK(with_commas(8000000000) == "8,000,000,000");
  CHECK(with_commas(-1234567) == "-1,234,567");
  CHECK(format_count(3e9) == "3,000,000,000");
  CHECK(format_count(6.4e20) == "6.4e+20");
  CHECK(format_duration(12) == "12 s");
  CHECK(format_duration(90) == "1.5 min");
  CHECK(format_duration(0.01) == "10 ms");
  CHECK(format_duration(7200) == "2.0 h");
}

TEST_CASE("check_work: the total against the limits, the largest part named with its fix") {
  const WorkLimits limits{4e9, 600};
  const WorkEstimate small{"10 actions", 1e3, 1e-3, "lower --a"};
  const WorkEstimate big{"8,000,000,000 actions (--microbatches 1000000000 x 8)", 640e9, 4000, "lower --microbatches"};
  CHECK(bad_input([&] { check_work("simulate", {small}, limits); }) == "no error");
  CHECK(bad_input([&] { check_work("simulate", {}, limits); }) == "no error");
  CHECK(bad_input([&] { check_work("simulate", {small, big}, limits); }) ==
        "simulate: 8,000,000,000 actions (--microbatches 1000000000 x 8) would take about 640 GB; the limit is 4.00 GB "
        "of this machine's memory; lower --microbatches or pass --allow-large");
  // Two parts that fit alone but not together.
  const WorkEstimate half{"half", 2.5e9, 1, "lower --h"};
  CHECK(bad_input([&] { check_work("run", {half, half}, limits); }) ==
        "run: half would take about 5.00 GB; the limit is 4.00 GB of this machine's memory; lower --h or pass --allow-large");
  const WorkEstimate slow{"42 candidates", 1e6, 3000, "lower --global-batch-size"};
  CHECK(bad_input([&] { check_work("plan", {slow}, limits); }) ==
        "plan: 42 candidates would take about 50.0 min; the limit is 10.0 min; lower --global-batch-size or pass "
        "--allow-large");
}
