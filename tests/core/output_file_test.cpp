#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

// What `write` throws under a 16 KiB file size limit, which makes write() fail as a full disk does without
// filling one (SIGXFSZ ignored meanwhile, as pipewright's main does).
template <class Write>
std::string with_16_kib_file_limit(Write write) {
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 16 * 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  const std::string error = bad_input(write);
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  return error;
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
  const std::string error = with_16_kib_file_limit([&] { write_output_file(path, std::string(64 * 1024, 'x')); });
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

TEST_CASE("write_output_files: a set is written all or nothing, the files before a failed one kept as they were") {
  const fs::path dir = fresh_folder("output-files-set");
  const std::string plan = (dir / "plan.json").string(), launch = (dir / "launch.sh").string();
  write_output_files({{plan, "old plan"}, {launch, "old launch"}});
  CHECK(file_contents(plan) == "old plan");
  CHECK(file_contents(launch) == "old launch");
  // The third file's folder cannot be made: nothing of the set changes, no temporary is left.
  write_output_file((dir / "file").string(), "x");
  const std::string under_file = (dir / "file" / "sub" / "x.json").string();
  CHECK(bad_input([&] { write_output_files({{plan, "new plan"}, {launch, "new launch"}, {under_file, "x"}}); }) ==
        "runtime error: cannot write '" + under_file + "': Not a directory");
  CHECK(file_contents(plan) == "old plan");
  CHECK(file_contents(launch) == "old launch");
  CHECK(entries(dir) == 3);
  // The disk fills on the second file, after the first was written whole: the first stays the old one.
  const std::string error =
      with_16_kib_file_limit([&] { write_output_files({{plan, "new plan"}, {launch, std::string(64 * 1024, 'x')}}); });
  CHECK(error == "runtime error: cannot write '" + launch + "': File too large");
  CHECK(file_contents(plan) == "old plan");
  CHECK(file_contents(launch) == "old launch");
  CHECK(entries(dir) == 3);
  // A new file of the set and a replaced one, both in place once it succeeds.
  write_output_files({{plan, "new plan"}, {(dir / "new.json").string(), "new"}});
  CHECK(file_contents(plan) == "new plan");
  CHECK(file_contents(dir / "new.json") == "new");
  CHECK(entries(dir) == 4);
}

TEST_CASE("remove_temporaries_on_signals: SIGINT, SIGTERM and SIGHUP remove the temporaries open, SIGXFSZ fails the write") {
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    const fs::path dir = fresh_folder("output-file-signal-" + std::to_string(signal));
    const std::string temporary = (dir / ".plan.json.1-0.tmp").string();
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      remove_temporaries_on_signals();
      std::ofstream(temporary) << "half a plan";
      detail::track_temporary(temporary);
      raise(signal);
      _exit(0);  // not reached: the signal ends the process
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signal);
    CHECK(!fs::exists(temporary));
    CHECK(entries(dir) == 0);
  }
  // Past the file size limit the write fails as a full disk does: reported, no temporary, the process alive.
  const fs::path dir = fresh_folder("output-file-sigxfsz");
  const std::string path = (dir / "trace.json").string();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    remove_temporaries_on_signals();
    rlimit small{16 * 1024, 16 * 1024};
    setrlimit(RLIMIT_FSIZE, &small);
    try {
      write_output_file(path, std::string(64 * 1024, 'x'));
    } catch (const Error& e) {
      _exit(std::string(e.what()) == "cannot write '" + path + "': File too large" ? 3 : 4);
    }
    _exit(5);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(entries(dir) == 0);
}
