#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "../golden.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"

using namespace pw;

// Grids of small schedules, compared exactly with tests/golden/schedules/<name>-p<p>-m<m>[-v<v>].txt.
// PIPEWRIGHT_UPDATE_GOLDEN=1 rewrites the files from the generators (tests/golden.hpp); check a rewritten grid
// against the published pictures and orders before accepting it: Megatron 2021 Fig. 4 (1f1b, interleaved),
// Qi et al. 2023 Fig. 3 (zb-h1, zb-h2) and Fig. 8 (zb-v), Qi et al. 2024 Fig. 5 (v-half, v-min),
// PyTorch's ScheduleZBVZeroBubble and ScheduleDualPipeV (zb-v, dualpipev; the CSV tests hold
// hand-derived orders of both), Lamy-Poirier 2023 Fig. 2 (bfs).
TEST_CASE("golden grids") {
  struct Case {
    const char* name;
    int p, m, v;
  };
  const Case cases[] = {
      {"gpipe", 4, 4, 1},  {"1f1b", 4, 8, 1},      {"1f1b", 4, 2, 1},   {"interleaved", 2, 4, 2},
      {"interleaved", 4, 8, 2}, {"bfs", 2, 4, 2}, {"bfs", 4, 8, 2},    {"zb-h1", 4, 8, 1},
      {"zb-h2", 4, 8, 1},  {"zb-v", 2, 4, 1},       {"zb-v", 4, 8, 1},   {"v-half", 4, 8, 1},
      {"v-min", 3, 6, 1},  {"v-min", 4, 8, 1},      {"dualpipev", 2, 4, 1}, {"dualpipev", 4, 8, 1},
      {"zb-auto", 4, 8, 1},
  };
  for (const Case& c : cases) {
    const std::string file = fmt::format("{}-p{}-m{}{}.txt", c.name, c.p, c.m, c.v > 1 ? fmt::format("-v{}", c.v) : "");
    INFO(file);
    const Schedule s = make_schedule({c.name, c.p, c.m, c.v});
    validate(s);
    check_golden("schedules/" + file, to_grid(s));
  }
}
