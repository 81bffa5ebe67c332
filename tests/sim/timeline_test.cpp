// The terminal timeline: a golden rendering of a tiny schedule, the majority rule per column, colour.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/timeline.hpp"
#include "sim_test_util.hpp"

using namespace pw;
using namespace pw::test;

namespace {
SimEvent compute(int rank, const char* text, double start, double end) {
  SimEvent e;
  e.rank = rank;
  e.action = action_from_text(text);
  e.start_s = start;
  e.end_s = end;
  return e;
}
}  // namespace

TEST_CASE("timeline of GPipe p = 2, m = 2 (golden)", "[sim][timeline]") {
  // F = 1 s, BW = 2 s, free comm: step (m + p - 1)(F + BW) = 9 s over 18 columns of 0.5 s.
  // Rank 0: F0 F1 [0,2], idle while rank 1 runs both backwards' first half, BW0 BW1 [5,9].
  // Rank 1: idle [0,1], F0 F1 [1,3], BW0 BW1 [3,7], idle [7,9].
  Recorder rec;
  const SimResult r =
      simulate(sim_input(generated("gpipe", 2, 2), uniform_costs(2, 1, 1.5, 0.5), ideal_cluster()), &rec);
  REQUIRE(r.step_time_s == 9);
  const std::string expected =
      "rank 0 |FFFF......bbbbbbbb|\n"
      "rank 1 |..FFFFbbbbbbbb....|\n"
      "        0          9.000 s\n"
      "        1 column = 500.0 ms; F forward, B backward (input), W backward (weight), b backward (B+W), X F&BW "
      "composite, . idle\n";
  CHECK(render_timeline(rec.events(), 2, r.step_time_s, 18, false) == expected);
}

TEST_CASE("timeline of ZB-H1 p = 2, m = 3 shows B, W and the middle of the axis (golden)", "[sim][timeline]") {
  // F = B = W = 1 s: 3 m + p - 1 = 10 s over 40 columns of 0.25 s; the axis marks 0, 5 s (column 20)
  // and 10 s (ending at column 39).
  Recorder rec;
  const SimResult r = simulate(sim_input(generated("zb-h1", 2, 3), uniform_costs(2, 1, 1, 1), ideal_cluster()), &rec);
  REQUIRE(r.step_time_s == 10);
  const std::string rows = render_timeline(rec.events(), 2, 10, 40, false);
  const std::string first_two = rows.substr(0, rows.find('\n', rows.find('\n') + 1) + 1);
  const std::string axis = rows.substr(first_two.size(), rows.find('\n', first_two.size()) - first_two.size());
  CHECK(axis == "        0" + std::string(19, ' ') + "5.000 s" + std::string(5, ' ') + "10.000 s");
  // Each rank is busy 9 s of 10 (3 s each of F, B, W): 4 idle columns and 12 of each letter per row.
  for (int row = 0; row < 2; ++row) {
    const std::string line = first_two.substr(row * 50, 49);
    CHECK(std::count(line.begin(), line.end(), '.') == 4);
    CHECK(std::count(line.begin(), line.end(), 'F') == 12);
    CHECK(std::count(line.begin(), line.end(), 'B') == 12);
    CHECK(std::count(line.begin(), line.end(), 'W') == 12);
  }
}

TEST_CASE("a column shows what occupies most of its slice", "[sim][timeline]") {
  // 10 columns of 0.1 s. Column 0: F 0.04 s, idle 0.06 s -> '.'. Column 1: F until 0.14 (0.04) then BW
  // from 0.14 (0.06) -> 'b'. Column 2..: BW until 0.5, W [0.5, 0.56] then idle: idle 0.04 < W 0.06 -> 'W'.
  const std::vector<SimEvent> events = {compute(0, "0F0", 0, 0.04), compute(0, "0F1", 0.10, 0.14),
                                        compute(0, "0BW0", 0.14, 0.5), compute(0, "0W1", 0.5, 0.56)};
  const std::string out = render_timeline(events, 1, 1.0, 10, false);
  CHECK(out.substr(0, out.find('\n')) == "rank 0 |.bbbbW....|");
}

TEST_CASE("in colour a cell is the micro-batch digit coloured by op", "[sim][timeline]") {
  const std::vector<SimEvent> events = {compute(0, "0F3", 0, 1), compute(0, "0BW13", 1, 2)};
  const std::string out = render_timeline(events, 1, 2, 10, true);
  const std::string f = "\x1b[34m3\x1b[0m", b = "\x1b[35m3\x1b[0m";
  CHECK(out.substr(0, out.find('\n')) == "rank 0 |" + f + f + f + f + f + b + b + b + b + b + "|");
  CHECK(out.find("digits: micro-batch mod 10") != std::string::npos);
}

TEST_CASE("timeline rejects a width below 10 and an empty step", "[sim][timeline]") {
  try {
    render_timeline({}, 1, 1.0, 5, false);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "timeline width 5: give at least 10 columns");
  }
  try {
    render_timeline({}, 1, 0.0, 20, false);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "timeline: step time 0 s; there is nothing to draw");
  }
}
