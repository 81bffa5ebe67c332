#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "schedules/generators.hpp"
#include "schedules/validate.hpp"

using namespace pw;

// Grids of small schedules, compared exactly with tests/golden/schedules/<name>-p<p>-m<m>[-v<v>].txt.
// PIPEWRIGHT_UPDATE_GOLDEN=1 rewrites the files from the generators; check a rewritten grid against
// the published pictures (Megatron 2021 Fig. 4, Qi et al. 2023 Fig. 3) before accepting it.
TEST_CASE("golden grids") {
  struct Case {
    const char* name;
    int p, m, v;
  };
  const Case cases[] = {
      {"gpipe", 4, 4, 1}, {"1f1b", 4, 8, 1}, {"1f1b", 4, 2, 1},
      {"interleaved", 2, 4, 2}, {"interleaved", 4, 8, 2}, {"zb-h1", 4, 8, 1},
  };
  const bool update = std::getenv("PIPEWRIGHT_UPDATE_GOLDEN") != nullptr;
  for (const Case& c : cases) {
    const std::string file = fmt::format("{}-p{}-m{}{}.txt", c.name, c.p, c.m, c.v > 1 ? fmt::format("-v{}", c.v) : "");
    INFO(file);
    const Schedule s = make_schedule({c.name, c.p, c.m, c.v});
    validate(s);
    const std::string path = std::string(PIPEWRIGHT_SOURCE_DIR) + "/tests/golden/schedules/" + file;
    const std::string grid = to_grid(s);
    if (update) std::ofstream(path, std::ios::binary) << grid;
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::ostringstream golden;
    golden << in.rdbuf();
    CHECK(grid == golden.str());
  }
}
