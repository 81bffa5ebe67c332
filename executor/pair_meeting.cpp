#include "executor/pair_meeting.hpp"

#include "core/error.hpp"

namespace pw {

void PairMeeting::meet(const std::atomic<bool>* stop, Clock::time_point deadline, const std::string& late,
                       const std::function<void()>& on_both) {
  std::unique_lock lock(mutex_);
  const long generation = generation_;
  if (++arrived_ == 2) {
    if (on_both) on_both();
    arrived_ = 0;
    ++generation_;
    both_.notify_all();
    return;
  }
  // Polled, so that a stop (which sets a flag and notifies nobody here) ends the wait.
  while (generation_ == generation) {
    if ((stop && *stop) || Clock::now() > deadline) {
      --arrived_;
      if (stop && *stop) throw RunAborted();
      throw_runtime("{}", late);
    }
    both_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

}  // namespace pw
