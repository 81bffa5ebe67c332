#pragma once
// Golden files: output a test must reproduce byte for byte, kept under tests/golden/. PIPEWRIGHT_UPDATE_GOLDEN=1
// rewrites them from the code; read a rewritten file against its test's sources before accepting it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "temp_folder.hpp"

// `relative`: the file's path under tests/golden/.
inline void check_golden(const std::string& relative, const std::string& text) {
  const std::string path = std::string(PIPEWRIGHT_SOURCE_DIR) + "/tests/golden/" + relative;
  if (std::getenv("PIPEWRIGHT_UPDATE_GOLDEN")) std::ofstream(path, std::ios::binary) << text;
  INFO(path);
  REQUIRE(std::filesystem::exists(path));
  CHECK(text == file_contents(path));
}
