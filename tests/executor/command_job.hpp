#pragma once
// One command line run to its end for the tests that start the pipewright binary (under mpirun, as torchrun's
// processes, or alone): its exit code, what it printed and how long it took, with a hard stop so that a hang
// fails the test instead of stalling the suite.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace pw::test {

// `pipewright run` of the tiny Llama over 2 stages: real compute, no profiling first (each process would
// profile), seeded with `tag`, by which the tests also find the processes a run leaves behind.
inline std::vector<std::string> tiny_run(const std::string& tag, const std::vector<std::string>& more = {}) {
  std::vector<std::string> a = {PIPEWRIGHT_BINARY, "run", "--model", std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-llama.json",
                                "--cluster", "ideal", "--pp", "2", "--microbatches", "4", "--schedule", "1f1b",
                                "--iterations", "2", "--warmup", "0", "--no-profile", "--seed", tag};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string sh_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string command_line(const std::vector<std::string>& args) {
  std::string cmd;
  // Appended piecewise: GCC 12 misreads `"literal" + std::string&&` as an overlapping copy (-Wrestrict).
  for (const std::string& a : args) cmd.append(cmd.empty() ? "" : " ").append(sh_quoted(a));
  return cmd;
}

struct Job {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

// `args` run by the shell with stdout and stderr in `base`.out and `base`.err (removed afterwards), stopped
// after `limit_s` seconds.
inline Job run_job(const std::vector<std::string>& args, const std::string& base, int limit_s = 120) {
  std::string cmd = "timeout -k 5 " + std::to_string(limit_s) + " ";
  cmd.append(command_line(args)).append(" >").append(sh_quoted(base + ".out"));
  cmd.append(" 2>").append(sh_quoted(base + ".err"));
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  Job j;
  j.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  j.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  j.out = slurp(base + ".out");
  j.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return j;
}

}  // namespace pw::test
