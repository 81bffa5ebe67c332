#pragma once
// Naming the process a job waits on. A process whose wait lasts longer than notice_after() tells the others
// what it waits for (a WaitNotice), and that the wait ended when it does. When a wait runs out, the process
// follows those notices from the one it waited on: a process that waits on no one is the one that stalled;
// one that itself waits is not to blame. Only the lowest-numbered process that waited on the stalled one
// directly reports (its own timeout names it); the others wait a little longer for that report, and name
// the stalled process themselves if it does not come.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "executor/backend.hpp"
#include "executor/transport.hpp"

namespace pw {

constexpr int kAtMeeting = -1;   // waits at a meeting (a barrier) for every process
constexpr int kNotWaiting = -2;  // a wait that was told ended

struct WaitNotice {
  int waiter = 0;
  int on = kNotWaiting;  // the process waited on, kAtMeeting or kNotWaiting
  std::string what;      // what it waits for, e.g. "0SEND_F3" (at most kWaitWhatBytes - 1 characters)
};

constexpr size_t kWaitWhatBytes = 32;
constexpr size_t kWaitNoticeBytes = 4 + 4 + kWaitWhatBytes;

std::vector<std::byte> wait_notice_to_wire(const WaitNotice& notice);
// Nothing for bytes of another length, a waiter outside 0..size - 1 or an `on` outside kNotWaiting..size - 1.
std::optional<WaitNotice> wait_notice_from_wire(std::span<const std::byte> bytes, int size);

// How long a wait lasts before the others are told: short against the timeout, so that a process that
// waits on a stalled one is known to wait long before anyone's timeout.
Clock::duration notice_after(Clock::duration timeout);

// Thrown at the end of a wait whose process is not the one to report a stall (see above) when the report
// did not come: names the stalled process(es).
struct PeerStalled : std::exception {
  explicit PeerStalled(std::string message) : message(std::move(message)) {}
  const char* what() const noexcept override { return message.c_str(); }
  std::string message;
};

// What every process of a group said it waits for, as this one heard it.
class WaitBoard {
 public:
  explicit WaitBoard(int size) : entries_(static_cast<size_t>(size)) {}

  void note(const WaitNotice& notice, Clock::time_point heard);

  // Process `me`, waiting on `on` (a process or kAtMeeting), at its deadline. `reports`: this process is the
  // one to report (it waits on a stalled process directly and no lower-numbered process is known to; at a
  // meeting, the lowest-numbered process known there). `stalled`: the processes at the end of the chains, ascending. `last_heard`: when the latest
  // notice on the way was heard (the reporting process's wait is at least that recent).
  struct Verdict {
    bool reports = true;
    std::vector<int> stalled;
    Clock::time_point last_heard{};
  };
  Verdict blame(int me, int on) const;

 private:
  struct Entry {
    int on = kNotWaiting;
    std::string what;
    Clock::time_point heard{};
  };
  void collect(int r, int me, std::vector<bool>& seen, Verdict& v) const;
  std::vector<Entry> entries_;
};

// One wait of process `me` on `on` (a process, kAtMeeting, or kNotWaiting for a wait the others are not
// told of, which simply times out), for `what` (e.g. "0SEND_F3"), until `deadline`.
class WaitWatch {
 public:
  // `start`: when the wait began (now unless given, as the tests give it, so that the timeout is exact).
  WaitWatch(int me, int on, std::string what, Clock::time_point deadline, Clock::time_point start = Clock::now());
  // The notice to send now, once the wait has lasted notice_after() (once).
  std::optional<WaitNotice> due(Clock::time_point now);
  // The notice that the wait ended, if the others were told it began.
  std::optional<WaitNotice> ended() const;
  Clock::time_point deadline() const { return deadline_; }
  Clock::duration timeout() const { return timeout_; }
  // When the waiting loop must look again: the notice's time, or the deadline.
  Clock::time_point next_look() const { return told_ || on_ == kNotWaiting ? deadline_ : std::min(deadline_, notice_at_); }
  // At the deadline: RecvTimeout when this process reports (or no one stalled), PeerStalled naming the
  // stalled process(es) at a meeting or after waiting for another's report in vain; else moves the deadline
  // later, once, to wait for the reporting process's word (its timeout runs at most one timeout after the
  // latest notice on the way; 2 s more for its word to arrive).
  void at_deadline(const WaitBoard& board);
  // How long the wait was given: "2" (seconds), for messages.
  std::string timeout_text() const;

 private:
  int me_, on_;
  std::string what_;
  Clock::time_point start_, deadline_, notice_at_;
  Clock::duration timeout_;
  bool told_ = false;
  bool extended_ = false;
};

// "rank 3" or "ranks 0, 2".
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace pw
