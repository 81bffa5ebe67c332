// `pipewright run` with its ranks as threads: a rank that stalls ends the process with exit 1 and the rank
// named, soon after --timeout, with nothing written; a run with ranks as processes is mpi_run_test.cpp's.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/executor/command_job.hpp"

namespace {

#ifndef PIPEWRIGHT_BINARY
#define PIPEWRIGHT_BINARY ""
#endif

using Ended = pw::test::Job;

// The binary run with `args`, stopped after 60 s should it hang.
Ended run_binary(std::vector<std::string> args, const std::string& name) {
  args.insert(args.begin(), PIPEWRIGHT_BINARY);
  return pw::test::run_job(args, std::string(PIPEWRIGHT_TEST_TMP) + "/" + name, 60);
}

std::vector<std::string> tiny_llama_run(const std::vector<std::string>& more) {
  std::vector<std::string> a = {"run", "--model", std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-llama.json",
                                "--cluster", "ideal", "--pp", "2", "--microbatches", "4", "--schedule", "1f1b",
                                "--iterations", "2", "--warmup", "0", "--no-profile"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("ranks as threads: a rank that stalls ends the run with exit 1 soon after --timeout, the rank named") {
  REQUIRE(access(PIPEWRIGHT_BINARY, X_OK) == 0);
  const std::string trace = std::string(PIPEWRIGHT_TEST_TMP) + "/thread-stall-trace.json";
  std::remove(trace.c_str());
  // Rank 0 hangs in its second forward; rank 1 waits for it, and times out after 1 s.
  const Ended e = run_binary(tiny_llama_run({"--timeout", "1", "--inject-failure", "0:0F1:stall", "--json", "--trace", trace}),
                             "thread-stall");
  CHECK(e.code == 1);
  CHECK(e.out.empty());
  CHECK(e.err == "error: rank 0 stalled at 0F1: it did not return within 1 s; the run ended without it\n");
  CHECK(e.seconds >= 1);
  CHECK(e.seconds < 5);  // the hook would hold the rank for a day; the run ends at the timeout plus 0.25 s
  CHECK(access(trace.c_str(), F_OK) != 0);
  WARN("rank thread stalls, --timeout 1: ended in " << e.seconds << " s");
}

TEST_CASE("ranks as threads: a single rank that stalls, with nobody waiting for it, ends the run the same way") {
  REQUIRE(access(PIPEWRIGHT_BINARY, X_OK) == 0);
  const Ended e = run_binary({"run", "--model", std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-llama.json",
                              "--cluster", "ideal", "--pp", "1", "--microbatches", "2", "--iterations", "1", "--warmup",
                              "0", "--no-profile", "--timeout", "0.5", "--inject-failure", "0:0BW1:stall"},
                             "thread-stall-alone");
  CHECK(e.code == 1);
  CHECK(e.err == "error: rank 0 stalled at 0BW1: it did not return within 0.5 s; the run ended without it\n");
  CHECK(e.seconds < 5);
}
