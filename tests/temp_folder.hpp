#pragma once
// Folders and files the tests write under the build's test folder, and what a file holds.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

// An empty folder `name` under PIPEWRIGHT_TEST_TMP (removed first if a previous run left it).
inline std::filesystem::path fresh_folder(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(PIPEWRIGHT_TEST_TMP) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string file_contents(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
