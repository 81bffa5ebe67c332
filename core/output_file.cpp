#include "core/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace pw {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, int error) {
  throw_runtime("cannot write '{}': {}", path, std::strerror(error));
}

// Writes all of `text` to `fd`; the errno of the first failure, or 0.
int write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

// Files that are not regular (devices, pipes) cannot be replaced by a rename; they are written as they are.
void write_in_place(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) fail(path, errno);
  const int error = write_all(fd, text);
  ::close(fd);
  if (error) fail(path, error);
}

// A name in the target's folder that no other writer (thread or process) picks.
std::string temporary_name(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  return (target.parent_path() / fmt::format(".{}.{}-{}.tmp", target.filename().string(), ::getpid(), counter++)).string();
}

}  // namespace

void write_output_file(const std::string& path, std::string_view text) {
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(target, ec)) {
    const fs::path resolved = fs::canonical(target, ec);
    if (!ec) target = resolved;
  }
  // A folder that does not exist yet is made (the commands checked first that it can be: cli/output_path.hpp).
  const fs::path folder = target.parent_path();
  if (!folder.empty() && !fs::exists(folder, ec)) {
    fs::create_directories(folder, ec);
    if (ec) fail(path, ec.value());
  }
  const fs::file_status status = fs::status(target, ec);
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    if (fs::is_directory(status)) fail(path, EISDIR);
    return write_in_place(path, text);
  }
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temporary = temporary_name(target);
    // 0666 under the umask: the permissions a plain new file gets.
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) fail(path, errno);
  }
  if (fd < 0) fail(path, EEXIST);
  int error = write_all(fd, text);
  // An existing file keeps its permissions.
  if (!error && fs::exists(status) && ::fchmod(fd, static_cast<mode_t>(status.permissions()) & 07777) != 0) error = errno;
  if (!error && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && !error) error = errno;
  if (!error && ::rename(temporary.c_str(), target.c_str()) != 0) error = errno;
  if (error) {
    ::unlink(temporary.c_str());
    fail(path, error);
  }
  // The rename itself reaches the disk with the folder.
  const std::string folder_name = folder.empty() ? "." : folder.string();
  const int dir = ::open(folder_name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace pw
