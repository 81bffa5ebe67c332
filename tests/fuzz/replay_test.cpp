// Every seed and every input a fuzzer ever crashed on (tests/fuzz/regressions/<target>/) through the same harness
// functions as libFuzzer's programs, in the ordinary build: a reader may refuse them with a pw::Error and
// nothing else.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_targets.hpp"
#include "generated_seeds.hpp"

namespace fs = std::filesystem;
using pw::fuzz::FuzzTarget;

namespace {

const fs::path kRoot = PIPEWRIGHT_SOURCE_DIR;
const fs::path kFuzzDir = kRoot / "tests" / "fuzz";

std::vector<std::uint8_t> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void replay(const FuzzTarget& target, const std::string& what, const std::vector<std::uint8_t>& bytes) {
  INFO(target.name << ": " << what);
  CHECK_NOTHROW(target.run(bytes.data(), bytes.size()));
}

const FuzzTarget* target_named(const std::string& name) {
  for (const FuzzTarget& t : pw::fuzz::fuzz_targets())
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("fuzz replay: the seeds of tests/fuzz/seeds.txt read or are refused with a pw::Error") {
  std::ifstream list(kFuzzDir / "seeds.txt");
  REQUIRE(list);
  std::set<std::string> seeded;
  std::string line;
  while (std::getline(list, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, path;
    fields >> name >> path;
    const FuzzTarget* target = target_named(name);
    INFO(line);
    REQUIRE(target != nullptr);
    REQUIRE(fs::is_regular_file(kRoot / path));
    replay(*target, path, file_bytes(kRoot / path));
    seeded.insert(name);
  }
  CHECK(seeded == std::set<std::string>{"model_json", "hf_config", "cluster", "schedule_csv"});
}

TEST_CASE("fuzz replay: the seeds pipewright's writers make read or are refused with a pw::Error") {
  for (const char* name : {"message_wire", "record_wire", "schedule_json", "schedule_csv"}) {
    const FuzzTarget* target = target_named(name);
    REQUIRE(target != nullptr);
    const std::vector<pw::fuzz::NamedSeed> seeds = pw::fuzz::generated_seeds(name);
    CHECK(!seeds.empty());
    for (const pw::fuzz::NamedSeed& seed : seeds) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(seed.bytes.data());
      replay(*target, seed.name, {p, p + seed.bytes.size()});
    }
  }
}

TEST_CASE("fuzz replay: every input a fuzzer found is refused with a pw::Error, nothing worse") {
  const fs::path regressions = kFuzzDir / "regressions";
  for (const FuzzTarget& target : pw::fuzz::fuzz_targets()) {
    if (!fs::is_directory(regressions / target.name)) continue;
    for (const fs::directory_entry& entry : fs::directory_iterator(regressions / target.name))
      replay(target, entry.path().filename().string(), file_bytes(entry.path()));
  }
  // A folder with a misspelt target name would replay nothing.
  if (fs::is_directory(regressions))
    for (const fs::directory_entry& entry : fs::directory_iterator(regressions)) {
      INFO(entry.path());
      CHECK(target_named(entry.path().filename().string()) != nullptr);
    }
}
