#pragma once
// Where the two rank threads of this process that hold the copies of a tied matrix meet, once or twice per
// optimizer step (the CPU and CUDA backends' gradient sums).
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "executor/transport.hpp"

namespace pw {

class PairMeeting {
 public:
  // Returns when both have arrived; the second to arrive runs `on_both` first, while the first still waits.
  // RunAborted when `stop` is set while waiting; Runtime error `late` past `deadline`. Either way the
  // meeting is left as if this caller had not come.
  void meet(const std::atomic<bool>* stop, Clock::time_point deadline, const std::string& late,
            const std::function<void()>& on_both = {});

 private:
  std::mutex mutex_;
  std::condition_variable both_;
  int arrived_ = 0;
  long generation_ = 0;
};

}  // namespace pw
