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

#include <sys/wait.h>
#include <unistd.h>

namespace {

#ifndef PIPEWRIGHT_BINARY
#define PIPEWRIGHT_BINARY ""
#endif

struct Ended {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The binary run with `args` in a shell, stopped by `timeout` after 60 s should it hang.
Ended run_binary(const std::vector<std::string>& args, const std::string& name) {
  const std::string base = std::string(PIPEWRIGHT_TEST_TMP) + "/" + name;
  std::string cmd = "timeout -k 5 60 '" + std::string(PIPEWRIGHT_BINARY) + "'";
  for (const std::string& a : args) cmd.append(" '").append(a).append("'");
  cmd.append(" >'").append(base).append(".out' 2>'").append(base).append(".err'");
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  Ended e;
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  e.out = file_text(base + ".out");
  e.err = file_text(base + ".err");
  return e;
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
