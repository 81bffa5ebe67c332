// fuzz_seeds <folder>: writes the seeds pipewright's own writers make (generated_seeds.hpp) into
// <folder>/<target>/, for scripts/fuzz.sh to add to the seeds it copies from examples/ and tests/golden/.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "fuzz_targets.hpp"
#include "generated_seeds.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds <folder>\n");
    return 2;
  }
  int written = 0;
  for (const pw::fuzz::FuzzTarget& target : pw::fuzz::fuzz_targets()) {
    const std::filesystem::path folder = std::filesystem::path(argv[1]) / target.name;
    for (const pw::fuzz::NamedSeed& seed : pw::fuzz::generated_seeds(target.name)) {
      std::filesystem::create_directories(folder);
      std::ofstream out(folder / seed.name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(seed.bytes.data()), static_cast<std::streamsize>(seed.bytes.size()));
      if (!out) {
        std::fprintf(stderr, "fuzz_seeds: cannot write %s\n", (folder / seed.name).c_str());
        return 1;
      }
      ++written;
    }
  }
  std::printf("fuzz_seeds: %d seeds written under %s\n", written, argv[1]);
  return 0;
}
