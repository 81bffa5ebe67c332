#include "executor/wait_notice.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace pw {

std::vector<std::byte> wait_notice_to_wire(const WaitNotice& notice) {
  std::vector<std::byte> out(kWaitNoticeBytes);
  const std::int32_t waiter = notice.waiter, on = notice.on;
  std::memcpy(out.data(), &waiter, 4);
  std::memcpy(out.data() + 4, &on, 4);
  std::memcpy(out.data() + 8, notice.what.data(), std::min(notice.what.size(), kWaitWhatBytes - 1));
  return out;
}

std::optional<WaitNotice> wait_notice_from_wire(std::span<const std::byte> bytes, int size) {
  if (bytes.size() != kWaitNoticeBytes) return std::nullopt;
  std::int32_t waiter = 0, on = 0;
  std::memcpy(&waiter, bytes.data(), 4);
  std::memcpy(&on, bytes.data() + 4, 4);
  if (waiter < 0 || waiter >= size || on < kNotWaiting || on >= size) return std::nullopt;
  const char* what = reinterpret_cast<const char*>(bytes.data() + 8);
  return WaitNotice{waiter, on, std::string(what, strnlen(what, kWaitWhatBytes - 1))};
}

Clock::duration notice_after(Clock::duration timeout) {
  return std::min<Clock::duration>(std::chrono::milliseconds(250), timeout / 8);
}

void WaitBoard::note(const WaitNotice& notice, Clock::time_point heard) {
  Entry& e = entries_[static_cast<size_t>(notice.waiter)];
  e.on = notice.on;
  e.what = notice.what;
  e.heard = heard;
}

void WaitBoard::collect(int r, int me, std::vector<bool>& seen, Verdict& v) const {
  if (seen[static_cast<size_t>(r)]) return;  // a cycle, or reached before
  seen[static_cast<size_t>(r)] = true;
  const Entry& e = entries_[static_cast<size_t>(r)];
  if (r == me || e.on == kNotWaiting) {
    if (r != me) v.stalled.push_back(r);
    return;
  }
  v.last_heard = std::max(v.last_heard, e.heard);
  if (e.on >= 0) {
    collect(e.on, me, seen, v);
    return;
  }
  for (int q = 0; q < static_cast<int>(entries_.size()); ++q)
    if (q != me && entries_[static_cast<size_t>(q)].on != kAtMeeting) collect(q, me, seen, v);
}

WaitBoard::Verdict WaitBoard::blame(int me, int on) const {
  Verdict v;
  std::vector<bool> seen(entries_.size(), false);
  seen[static_cast<size_t>(me)] = true;
  if (on >= 0) {
    collect(on, me, seen, v);
    // Of the processes waiting on the stalled one directly, the lowest-numbered reports.
    v.reports = v.stalled == std::vector<int>{on};
    for (int q = 0; q < me && v.reports; ++q)
      if (entries_[static_cast<size_t>(q)].on == on) {
        v.reports = false;
        v.last_heard = std::max(v.last_heard, entries_[static_cast<size_t>(q)].heard);
      }
  } else {
    int lowest_at_meeting = me;
    for (int q = 0; q < static_cast<int>(entries_.size()); ++q) {
      if (q == me) continue;
      if (entries_[static_cast<size_t>(q)].on == kAtMeeting)
        lowest_at_meeting = std::min(lowest_at_meeting, q);
      else
        collect(q, me, seen, v);
    }
    v.reports = lowest_at_meeting == me;
  }
  std::sort(v.stalled.begin(), v.stalled.end());
  return v;
}

WaitWatch::WaitWatch(int me, int on, std::string what, Clock::time_point deadline, Clock::time_point start)
    : me_(me), on_(on), what_(std::move(what)), start_(start), deadline_(deadline),
      notice_at_(start_ + notice_after(deadline - start_)), timeout_(deadline - start_) {}

std::optional<WaitNotice> WaitWatch::due(Clock::time_point now) {
  if (told_ || on_ == kNotWaiting || now < notice_at_) return std::nullopt;
  told_ = true;
  return WaitNotice{me_, on_, what_};
}

std::optional<WaitNotice> WaitWatch::ended() const {
  if (!told_) return std::nullopt;
  return WaitNotice{me_, kNotWaiting, ""};
}

std::string WaitWatch::timeout_text() const {
  // The wait begins a moment after its deadline was set from the timeout a person gave (a few ms later on a
  // loaded machine or under a sanitizer), so the span is a hair under it: two significant digits name the
  // timeout given (0.2 s, not 0.199 s), and still the span itself where the wait began well after.
  const double s = std::chrono::duration<double>(timeout_).count();
  if (s <= 0) return "0";
  const double step = std::pow(10.0, std::floor(std::log10(s)) - 1);
  return fmt::format("{:g}", std::round(s / step) * step);
}

void WaitWatch::at_deadline(const WaitBoard& board) {
  if (on_ == kNotWaiting) throw RecvTimeout();
  const WaitBoard::Verdict v = board.blame(me_, on_);
  if (v.stalled.empty()) throw RecvTimeout();
  const bool one = v.stalled.size() == 1;
  if (on_ == kAtMeeting && (v.reports || extended_))
    throw PeerStalled(fmt::format("{} did not arrive within {} s and wait{} on no rank: stalled", ranks_text(v.stalled),
                                  timeout_text(), one ? "s" : ""));
  if (v.reports) throw RecvTimeout();
  if (extended_)
    throw PeerStalled(fmt::format("no message from rank {} ({}) within {} s; rank {} itself waits on {}, which wait{} on "
                                  "no rank: stalled",
                                  on_, what_, timeout_text(), on_, ranks_text(v.stalled), one ? "s" : ""));
  extended_ = true;
  deadline_ = std::max(deadline_, v.last_heard + timeout_) + std::chrono::seconds(2);
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string list;
  for (int r : ranks) list += fmt::format("{}{}", list.empty() ? "" : ", ", r);
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", list);
}

}  // namespace pw
