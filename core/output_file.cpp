#include "core/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <unistd.h>

#include <csignal>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

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
std::string temporary_name(const fs::path& target, const char* kind = "tmp") {
  static std::atomic<unsigned> counter{0};
  return (target.parent_path() / fmt::format(".{}.{}-{}.{}", target.filename().string(), ::getpid(), counter++, kind))
      .string();
}

// The temporaries open now, for the signal handler: fixed slots it can read without allocating or locking
// (state 2: `name` is whole). A name too long for a slot is still removed on every failure but a signal.
constexpr int kSlots = 256;
constexpr size_t kNameBytes = 4200;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a temporary
  char name[kNameBytes];
};
Slot g_slots[kSlots];

int track(const std::string& name) {
  if (name.size() >= kNameBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].name, name.c_str(), name.size() + 1);
      g_slots[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void untrack(int slot) {
  if (slot >= 0) g_slots[slot].state.store(0, std::memory_order_release);
}

// While a set is renamed, a signal that reaches another thread waits for the last rename (the renaming thread
// holds the signals itself): the process then ends with the set whole.
std::atomic<int> g_renaming{0};
std::atomic<int> g_deferred{0};

void remove_tracked_and_raise(int signal) {
  for (Slot& slot : g_slots)
    if (slot.state.load(std::memory_order_acquire) == 2) ::unlink(slot.name);
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

extern "C" void remove_temporaries_and_die(int signal) {
  if (g_renaming.load() > 0) {
    g_deferred.store(signal);
    return;
  }
  remove_tracked_and_raise(signal);
}

// One file of a set on its way to the disk.
struct Pending {
  std::string path;  // as given, for messages
  fs::path target;   // the link followed
  bool in_place = false;
  bool existed = false;
  fs::perms permissions{};
  std::string temporary;
  int temporary_slot = -1;
  std::string backup;  // a link to the old target while the set is renamed
  int backup_slot = -1;
};

void discard(Pending& p) {
  if (!p.temporary.empty()) ::unlink(p.temporary.c_str());
  untrack(p.temporary_slot);
  p.temporary_slot = -1;
  if (!p.backup.empty()) ::unlink(p.backup.c_str());
  untrack(p.backup_slot);
  p.backup_slot = -1;
}

// Resolves the target (a link followed) and makes its folder. Errno on failure.
int prepare(Pending& p) {
  std::error_code ec;
  p.target = p.path;
  if (fs::is_symlink(p.target, ec)) {
    const fs::path resolved = fs::canonical(p.target, ec);
    if (!ec) p.target = resolved;
  }
  // A folder that does not exist yet is made (the commands checked first that it can be: cli/output_path.hpp).
  const fs::path folder = p.target.parent_path();
  if (!folder.empty() && !fs::exists(folder, ec)) {
    fs::create_directories(folder, ec);
    if (ec) return ec.value();
  }
  const fs::file_status status = fs::status(p.target, ec);
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    if (fs::is_directory(status)) return EISDIR;
    p.in_place = true;
    return 0;
  }
  p.existed = fs::exists(status);
  p.permissions = status.permissions();
  return 0;
}

// Writes, fsyncs and closes the temporary beside the target (tracked for the signal handler). Errno on failure.
int write_temporary(Pending& p, std::string_view text) {
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    p.temporary = temporary_name(p.target);
    p.temporary_slot = track(p.temporary);
    // 0666 under the umask: the permissions a plain new file gets.
    fd = ::open(p.temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      const int error = errno;
      untrack(p.temporary_slot);
      p.temporary_slot = -1;
      p.temporary.clear();
      if (error != EEXIST) return error;
    }
  }
  if (fd < 0) return EEXIST;
  int error = write_all(fd, text);
  // An existing file keeps its permissions.
  if (!error && p.existed && ::fchmod(fd, static_cast<mode_t>(p.permissions) & 07777) != 0) error = errno;
  if (!error && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && !error) error = errno;
  return error;
}

void fsync_folder(const fs::path& target) {
  const fs::path folder = target.parent_path();
  const std::string name = folder.empty() ? "." : folder.string();
  const int dir = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

// Signals that would end the process held while the set is renamed: its handler then finds the set whole.
class HeldSignals {
 public:
  HeldSignals() {
    g_renaming.fetch_add(1);
    sigset_t held;
    sigemptyset(&held);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&held, s);
    pthread_sigmask(SIG_BLOCK, &held, &before_);
  }
  ~HeldSignals() {
    if (g_renaming.fetch_sub(1) == 1) {
      const int deferred = g_deferred.exchange(0);
      if (deferred) remove_tracked_and_raise(deferred);
    }
    pthread_sigmask(SIG_SETMASK, &before_, nullptr);
  }
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

 private:
  sigset_t before_{};
};

}  // namespace

void write_output_files(const std::vector<OutputText>& files) {
  std::vector<Pending> pending(files.size());
  for (size_t i = 0; i < files.size(); ++i) pending[i].path = files[i].path;
  const auto fail_all = [&](size_t which, int error) {
    for (Pending& p : pending) discard(p);
    fail(pending[which].path, error);
  };
  for (size_t i = 0; i < files.size(); ++i) {
    if (const int error = prepare(pending[i])) fail_all(i, error);
    if (pending[i].in_place) continue;
    if (const int error = write_temporary(pending[i], files[i].text)) fail_all(i, error);
  }
  {
    const HeldSignals held;
    // The old targets kept as links: a rename that fails puts back those replaced before it.
    for (Pending& p : pending) {
      if (p.in_place || !p.existed) continue;
      p.backup = temporary_name(p.target, "old");
      p.backup_slot = track(p.backup);
      if (::link(p.target.c_str(), p.backup.c_str()) != 0) {  // no hard links here: that file cannot be put back
        untrack(p.backup_slot);
        p.backup_slot = -1;
        p.backup.clear();
      }
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      if (p.in_place) continue;
      if (::rename(p.temporary.c_str(), p.target.c_str()) == 0) {
        untrack(p.temporary_slot);
        p.temporary_slot = -1;
        p.temporary.clear();
        continue;
      }
      const int error = errno;
      for (size_t k = 0; k < i; ++k) {
        Pending& done = pending[k];
        if (done.in_place) continue;
        if (!done.existed) {
          ::unlink(done.target.c_str());
        } else if (!done.backup.empty() && ::rename(done.backup.c_str(), done.target.c_str()) == 0) {
          untrack(done.backup_slot);
          done.backup_slot = -1;
          done.backup.clear();
        }
      }
      fail_all(i, error);
    }
    for (Pending& p : pending) discard(p);  // the backups; the temporaries are renamed
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i].in_place) {
      write_in_place(pending[i].path, files[i].text);
    } else {
      fsync_folder(pending[i].target);  // the rename itself reaches the disk with the folder
    }
  }
}

void write_output_file(const std::string& path, std::string_view text) {
  write_output_files({OutputText{path, std::string(text)}});
}

void remove_temporaries_on_signals() {
  for (int s : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction action {};
    action.sa_handler = remove_temporaries_and_die;
    sigemptyset(&action.sa_mask);
    sigaction(s, &action, nullptr);
  }
  ::signal(SIGXFSZ, SIG_IGN);
}

namespace detail {
int track_temporary(const std::string& name) { return track(name); }
void untrack_temporary(int slot) { untrack(slot); }
}  // namespace detail

}  // namespace pw
