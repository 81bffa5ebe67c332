#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "../error_text.hpp"
#include "../temp_folder.hpp"
#include "core/output_file.hpp"

using namespace pw;
namespace fs = std::filesystem;

namespace {

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("write_output_file: creates and replaces a file whole, leaving nothing else in its folder") {
  const fs::path dir = fresh_folder("output-file-replace");
  const std::string path = (dir / "plan.json").string();
  write_output_file(path, "first");
  CHECK(file_contents(path) == "first");
  write_output_file(path, "second, longer");
  CHECK(file_contents(path) == "second, longer");
  CHECK(entries(dir) == 1);
}

TEST_CASE("write_output_file: an existing file keeps its permissions") {
  const fs::path dir = fresh_folder("output-file-permissions");
  const fs::path path = dir / "run.sh";
  write_output_file(path.string(), "old");
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read);
  write_output_file(path.string(), "new");
  CHECK(fs::status(path).permissions() == (fs::perms::owner_all | fs::perms::group_read));
}

TEST_CASE("write_output_file: a write that fails half-way (the disk full) leaves the old file and no temporary") {
  const fs::path dir = fresh_folder("output-file-full");
  const std::string path = (dir / "plan.json").string();
  write_output_file(path, "the old plan");
  // A file size limit makes write() fail as a full disk does, without filling one.
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 16 * 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  const std::string error = bad_input([&] { write_output_file(path, std::string(64 * 1024, 'x')); });
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  CHECK(error == "runtime error: cannot write '" + path + "': File too large");
  CHECK(file_contents(path) == "the old plan");
  CHECK(entries(dir) == 1);
}

TEST_CASE("write_output_file: missing folders are made, a folder that cannot be made or hold files names the path") {
  const fs::path made = fresh_folder("output-file-made");
  write_output_file((made / "a" / "b" / "plan.json").string(), "x");
  CHECK(file_contents(made / "a" / "b" / "plan.json") == "x");
  write_output_file((made / "file").string(), "x");
  const std::string under_file = (made / "file" / "sub" / "plan.json").string();
  CHECK(bad_input([&] { write_output_file(under_file, "x"); }) == "runtime error: cannot write '" + under_file +
                                                                       "': Not a directory");
  // /proc takes no new files, even from root.
  CHECK(bad_input([] { write_output_file("/proc/pipewright-plan.json", "x"); }).starts_with(
      "runtime error: cannot write '/proc/pipewright-plan.json': "));
  const fs::path dir = fresh_folder("output-file-directory");
  CHECK(bad_input([&] { write_output_file(dir.string(), "x"); }) ==
        "runtime error: cannot write '" + dir.string() + "': Is a directory");
}

TEST_CASE("write_output_file: a device is written in place and a link is followed") {
  write_output_file("/dev/null", "discarded");
  const fs::path dir = fresh_folder("output-file-link");
  write_output_file((dir / "target.json").string(), "old");
  fs::create_symlink("target.json", dir / "link.json");
  write_output_file((dir / "link.json").string(), "new");
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(file_contents(dir / "target.json") == "new");
  CHECK(entries(dir) == 2);
}
