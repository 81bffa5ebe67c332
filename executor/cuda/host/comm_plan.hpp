#pragma once
// The communication of a lowered schedule as the NCCL transport runs it. Each ordered pair of ranks that
// exchanges tensors gets a channel: a communicator of its own with one stream at each end, carrying
// messages one way only, in the order the sender issues them. Sends and receives therefore never queue
// behind each other on a shared communicator or stream, and a channel cannot deadlock on its own: a
// receive that the receiver's list needs before earlier messages of the same channel posts those earlier
// ones first (their data waits in buffers), since the sender issues them no later than the one wanted.
// Plain C++ so that the plan is tested without a GPU.
#include <map>
#include <vector>

#include "executor/transport.hpp"
#include "schedules/ir.hpp"

namespace pw {

struct Channel {
  int src = 0;
  int dst = 0;
  std::vector<MessageKey> messages;  // one iteration's, in the sender's order (iteration 0)
};

class CommPlan {
 public:
  // BadInput when `lowered` is not lowered.
  explicit CommPlan(const Schedule& lowered);

  // Ordered by (src, dst): every rank creates the communicators in this order (creating one is collective).
  const std::vector<Channel>& channels() const { return channels_; }
  // The channel from src to dst, or -1.
  int channel_of(int src, int dst) const;
  // Where the message `key` (its iteration ignored) stands in its channel's order; Runtime error for a
  // message the schedule never sends.
  int position(int channel, const MessageKey& key) const;
  // The channels a rank sends on or receives from, ascending: the streams it needs besides compute.
  std::vector<int> channels_of(int rank) const;

 private:
  std::vector<Channel> channels_;
  std::map<std::pair<int, int>, int> by_pair_;
  std::vector<std::map<std::tuple<Op, int, int>, int>> positions_;  // per channel: (op, stage, mb) -> index
};

// The receives of one channel at its receiving rank. Messages are posted strictly in the sender's order;
// asking for one further on posts everything before it in one NCCL group.
class ReceiveCursor {
 public:
  explicit ReceiveCursor(int messages_per_iteration) : per_iteration_(messages_per_iteration) {}
  // The range of global positions (iteration * messages per iteration + position) to post now so that the
  // message at `position` of `iteration` is posted: [first, last], empty (first > last) when it already is.
  struct Range {
    long first = 0;
    long last = -1;
    bool empty() const { return first > last; }
  };
  Range post_through(int iteration, int position);
  long posted() const { return next_; }  // how many have been posted

 private:
  int per_iteration_;
  long next_ = 0;
};

}  // namespace pw
