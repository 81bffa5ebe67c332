#pragma once
// Runs the command line in-process and keeps what it printed.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

struct CliResult {
  int code = 0;
  std::string out;
  std::string err;
};

inline CliResult run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "pipewright");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  CliResult r;
  r.code = pw::cli_main(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

inline std::string source_path(const std::string& relative) { return std::string(PIPEWRIGHT_SOURCE_DIR) + "/" + relative; }

// The small dense model the CLI tests profile and plan.
inline const std::string kLlama = source_path("examples/tiny-llama.json");

// A file of the tests' own, in the build's scratch folder.
inline std::string tmp(const std::string& name) { return std::string(PIPEWRIGHT_TEST_TMP) + "/" + name; }

// The arguments with more after them.
inline std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Bad input: exit 2, nothing on standard output, and exactly "error: <message>" on one line.
inline void check_bad_input(const std::vector<std::string>& args, const std::string& message) {
  const CliResult r = run_cli(args);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "error: " + message + "\n");
}
