#include "cli/python_module.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

extern char** environ;

namespace pw {
namespace {

// A temporary file that holds one stream of the child, removed when done.
class CaptureFile {
 public:
  CaptureFile() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pipewright-python-XXXXXX").string();
    fd_ = mkstemp(pattern.data());
    if (fd_ < 0) throw_runtime("cannot make a temporary file in {}: {}", pattern, std::strerror(errno));
    path_ = pattern;
  }
  ~CaptureFile() {
    if (fd_ >= 0) close(fd_);
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  CaptureFile(const CaptureFile&) = delete;
  CaptureFile& operator=(const CaptureFile&) = delete;
  int fd() const { return fd_; }
  std::string text() const {
    std::ifstream in(path_);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  int fd_ = -1;
  std::string path_;
};

std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace

namespace {
std::string& interpreter_in_use() {
  static std::string path;
  return path;
}
}  // namespace

void use_python_interpreter(const std::string& path) { interpreter_in_use() = path; }

std::string python_interpreter() {
  if (const char* p = std::getenv("PIPEWRIGHT_PYTHON"); p && *p) return p;
  if (!interpreter_in_use().empty()) return interpreter_in_use();
  std::error_code ec;
  const std::string venv = std::string(PIPEWRIGHT_SOURCE_DIR) + "/.venv/bin/python3";
  if (std::filesystem::exists(venv, ec)) return venv;
  // Installed by pip: the command sits beside the interpreter of the environment that has the package.
  const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "python3";
  if (!ec && std::filesystem::exists(beside, ec)) return beside.string();
  return "python3";
}

void run_python_module(const std::string& module, const std::vector<std::string>& args, std::ostream& out) {
  const std::string python = python_interpreter();
  std::vector<std::string> argv{python, "-m", module};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // The environment with python/ first on PYTHONPATH.
  // An installed package is found by the interpreter itself; the source tree's, when there, goes first.
  std::error_code ec;
  const std::string python_dir = std::string(PIPEWRIGHT_SOURCE_DIR) + "/python";
  const char* old_path = std::getenv("PYTHONPATH");
  std::vector<std::string> entries;
  if (std::filesystem::exists(python_dir, ec)) entries.push_back(python_dir);
  if (old_path && *old_path) entries.emplace_back(old_path);
  std::string path_entry = "PYTHONPATH=" + fmt::format("{}", fmt::join(entries, ":"));
  std::vector<std::string> env{path_entry};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  std::vector<char*> cenv;
  for (std::string& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  CaptureFile stdout_file, stderr_file;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, stdout_file.fd(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stderr_file.fd(), STDERR_FILENO);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python.c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw_runtime("cannot start {} ({}); set PIPEWRIGHT_PYTHON to a Python 3 with pyarrow (scripts/install-deps.sh "
                  "makes one in .venv)",
                  python, std::strerror(spawned));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw_runtime("waiting for {} -m {}: {}", python, module, std::strerror(errno));
  out << stdout_file.text();
  const std::string err = stderr_file.text();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0) return;
  std::string line = last_line(err);
  if (line.rfind("error: ", 0) == 0) line = line.substr(7);
  if (code == 2) throw Error(ErrorKind::BadInput, line);
  if (line.empty()) line = WIFSIGNALED(status) ? fmt::format("killed by signal {}", WTERMSIG(status)) : "no message";
  throw_runtime("{}{}", line,
                code == 1 ? "" : fmt::format(" ({} -m {} exited with {})", python, module, code));
}

}  // namespace pw
