#include "executor/mpi_world.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <thread>

#include <signal.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "core/error.hpp"
#include "executor/transport.hpp"

namespace pw {
namespace {

constexpr auto kPeerCheckEvery = std::chrono::milliseconds(50);

// Whether the process `pid` on this host still runs (a zombie waiting to be reaped has ended).
bool process_alive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;  // no /proc: kill() is all we know
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

// The first `spin` of a wait only yields (a transfer between two cores lands within microseconds); later
// the wait sleeps, so that a rank waiting for a slow stage leaves the core to the ranks that compute.
void pause(Clock::duration waited, Clock::duration spin) {
#if defined(__linux__)
  thread_local const bool slack_set = prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  (void)slack_set;
#endif
  if (waited < spin)
    std::this_thread::yield();
  else if (waited < std::chrono::milliseconds(100))
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  else
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

struct ProcessCard {
  int pid = 0;
  char host[256] = {};
  char machine[192] = {};  // boot id and pid namespace: pids mean the same only where these agree
};

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Two containers may share a host name, and two machines may too; the boot id and the pid namespace tell
// whether a peer's pid can be looked up from here.
std::string machine_identity() {
  char ns[128] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  const std::string boot = first_line("/proc/sys/kernel/random/boot_id");
  if (n <= 0 || boot.empty()) return "";  // not Linux: never look peers up
  return boot + " " + std::string(ns, static_cast<size_t>(n));
}

}  // namespace

void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw_runtime("{}: {}", call, std::string(text, static_cast<size_t>(length)));
}

MpiWorld::MpiWorld(double timeout_s) {
  int provided = 0;
  mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_SERIALIZED)
    throw_runtime("MPI_Init_thread: this MPI lets only the main thread call it; the ranks call it from their own");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");

  ProcessCard mine;
  mine.pid = static_cast<int>(getpid());
  gethostname(mine.host, sizeof(mine.host) - 1);
  const std::string machine = machine_identity();
  std::strncpy(mine.machine, machine.c_str(), sizeof(mine.machine) - 1);
  std::vector<ProcessCard> cards(static_cast<size_t>(size_));
  MPI_Request request = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallgather(&mine, sizeof(ProcessCard), MPI_BYTE, cards.data(), sizeof(ProcessCard), MPI_BYTE, comm_,
                           &request),
            "MPI_Iallgather");
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  const Clock::time_point start = Clock::now();
  for (int done = 0;;) {
    mpi_check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) break;
    if (Clock::now() >= deadline)
      throw_runtime("rank {} failed at the start: the other processes did not report within {:g} s", rank_, timeout_s);
    pause(Clock::now() - start, {});
  }
  for (const ProcessCard& c : cards) {
    pids_.push_back(c.pid);
    hosts_.emplace_back(c.host, strnlen(c.host, sizeof(c.host)));
    const std::string theirs(c.machine, strnlen(c.machine, sizeof(c.machine)));
    same_machine_.push_back(!machine.empty() && theirs == machine);
  }
  lost_.assign(static_cast<size_t>(size_), false);
  board_ = WaitBoard(size_);
  // More processes than cores here (mpirun --oversubscribe): a spinning waiter would take the core of a
  // process that has work, so waits sleep from the start.
  const auto here = std::count(same_machine_.begin(), same_machine_.end(), true);
  if (here <= static_cast<long>(std::thread::hardware_concurrency())) spin_ = std::chrono::microseconds(200);
}

MpiWorld::~MpiWorld() {
  if (!finalize_) return;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  try {
    std::lock_guard lock(mutex_);
    while (!sends_.empty() && Clock::now() < deadline) progress_locked();
  } catch (const std::exception&) {
    // Finalising is all that is left to do.
  }
  MPI_Comm_free(&comm_);
  MPI_Finalize();
}

void MpiWorld::progress_locked() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    mpi_check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    it = done ? sends_.erase(it) : std::next(it);
  }
  for (;;) {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    mpi_check(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &found, &message, &status), "MPI_Improbe");
    if (!found) break;
    int count = 0;
    mpi_check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    Incoming& in = incoming_.emplace_back();
    in.source = status.MPI_SOURCE;
    in.tag = static_cast<MpiTag>(status.MPI_TAG);
    in.bytes.size = static_cast<size_t>(count);
    in.bytes.data.reset(new std::byte[in.bytes.size]);  // left uninitialised: MPI fills it
    mpi_check(MPI_Imrecv(in.bytes.data.get(), count, MPI_BYTE, &message, &in.request), "MPI_Imrecv");
  }
  for (auto it = incoming_.begin(); it != incoming_.end();) {
    int done = 0;
    mpi_check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) {
      auto next = std::next(it);
      arrived_.splice(arrived_.end(), incoming_, it);
      it = next;
    } else {
      ++it;
    }
  }
}

void MpiWorld::send(int dst, MpiTag tag, std::vector<std::byte> bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    throw_runtime("a message of {} bytes exceeds what one MPI send carries (2 GiB)", bytes.size());
  std::lock_guard lock(mutex_);
  Pending& p = sends_.emplace_back();
  p.bytes = std::move(bytes);
  mpi_check(MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, dst, tag, comm_, &p.request),
            "MPI_Isend");
  progress_locked();
}

bool MpiWorld::try_receive(int src, MpiTag tag, MpiBytes& out, int* from) {
  progress_locked();
  for (auto it = arrived_.begin(); it != arrived_.end(); ++it) {
    if (it->tag != tag || (src != MPI_ANY_SOURCE && it->source != src)) continue;
    out = std::move(it->bytes);
    if (from) *from = it->source;
    arrived_.erase(it);
    return true;
  }
  return false;
}

void MpiWorld::check_notices_locked() {
  MpiBytes notice;
  if (!try_receive(MPI_ANY_SOURCE, kFailureTag, notice)) return;
  aborted_ = true;
  throw PeerFailed(std::string(reinterpret_cast<const char*>(notice.data.get()), notice.size));
}

bool MpiWorld::check_peers() {
  std::lock_guard lock(mutex_);
  bool any = false;
  for (int r = 0; r < size_; ++r) {
    const auto i = static_cast<size_t>(r);
    if (r != rank_ && !lost_[i] && same_machine_[i] && !process_alive(pids_[i])) lost_[i] = true;
    any = any || lost_[i];
  }
  return any;
}

void MpiWorld::take_wait_notices_locked() {
  MpiBytes bytes;
  int from = 0;
  while (try_receive(MPI_ANY_SOURCE, kWaitTag, bytes, &from)) {
    const std::optional<WaitNotice> notice = wait_notice_from_wire(bytes.view(), size_);
    if (notice && notice->waiter == from) board_.note(*notice, Clock::now());
  }
}

void MpiWorld::tell_locked(const WaitNotice& notice) {
  const std::vector<std::byte> bytes = wait_notice_to_wire(notice);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || lost_[static_cast<size_t>(r)]) continue;
    Pending& p = sends_.emplace_back();
    p.bytes = bytes;
    if (MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, r, kWaitTag, comm_, &p.request) !=
        MPI_SUCCESS)
      sends_.pop_back();  // a notice only helps name a stall; the wait goes on without it
  }
}

void MpiWorld::wait(Clock::time_point deadline, const std::function<bool()>& done, int on, const std::string& what) {
  WaitWatch watch(rank_, on, what, deadline);
  const Clock::time_point start = Clock::now();
  bool peer_gone = false;
  for (;;) {
    if (aborted_) throw RunAborted();
    {
      std::lock_guard lock(mutex_);
      progress_locked();
      check_notices_locked();
      take_wait_notices_locked();
      if (done()) {
        if (auto ended = watch.ended()) tell_locked(*ended);
        return;
      }
    }
    // A peer found gone at the previous poll: what it sent before it ended has been taken since.
    if (peer_gone) {
      const int lowest_live = static_cast<int>(std::find(lost_.begin(), lost_.end(), false) - lost_.begin());
      if (lowest_live == rank_) {
        const int gone = static_cast<int>(std::find(lost_.begin(), lost_.end(), true) - lost_.begin());
        aborted_ = true;
        throw PeerLost(gone, describe(gone));
      }
    }
    const Clock::time_point now = Clock::now();
    if (now >= next_peer_check_) {
      peer_gone = check_peers();
      next_peer_check_ = now + kPeerCheckEvery;
    }
    if (auto notice = watch.due(now)) {
      std::lock_guard lock(mutex_);
      tell_locked(*notice);
    }
    if (now >= watch.deadline()) {
      std::lock_guard lock(mutex_);
      watch.at_deadline(board_);  // throws, or waits a little longer for the report
    }
    pause(now - start, spin_);
  }
}

void MpiWorld::announce_failure(const std::string& message) {
  std::lock_guard lock(mutex_);
  if (announced_) return;
  announced_ = true;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || lost_[static_cast<size_t>(r)]) continue;
    Pending& p = sends_.emplace_back();
    const auto* text = reinterpret_cast<const std::byte*>(message.data());
    p.bytes.assign(text, text + message.size());
    // Best effort: the job is ending either way.
    if (MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, r, kFailureTag, comm_, &p.request) !=
        MPI_SUCCESS)
      sends_.pop_back();
  }
}

std::string MpiWorld::describe(int rank) const {
  return fmt::format("pid {} on {}", pids_[static_cast<size_t>(rank)], hosts_[static_cast<size_t>(rank)]);
}

}  // namespace pw
