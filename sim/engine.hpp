#pragma once
// The discrete-event kernel, kept apart from any pipeline notion (as SimGrid keeps its kernel apart from
// the activities built on it): a simulated clock, an event queue, and two kinds of resources: serial
// lanes (one job at a time, FIFO) and links whose bandwidth is shared equally by the flows on them.
// Events are small PODs, dispatched by a handler the model passes to run() as a template argument, so
// the hot path has no std::function, no virtual call and no allocation per event.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace pw {

// What happens (kind, target) is the model's business. `version` lets the model recognise an event that
// a later re-timing superseded. Among events at the same time the earlier scheduled runs first, so a run
// is deterministic.
struct EngineEvent {
  double time = 0;
  std::uint32_t kind = 0;
  std::uint32_t target = 0;
  std::uint32_t version = 0;
};

// A monotone priority queue on (time, order of pushing): a radix heap on the bits of the time (for
// doubles >= 0 the bit patterns order like the values). A simulation never schedules before the event it
// is handling, so pushes are O(1) and a pop moves each event down a few of 65 buckets over its life.
// Events with equal times come out in push order. Pushing a time earlier than the last popped one throws
// Runtime; so does a negative or NaN time.
class EventQueue {
 public:
  EventQueue() { std::fill(std::begin(least_), std::end(least_), ~std::uint64_t{0}); }
  void reserve(std::size_t n) { buckets_[0].reserve(n); }
  void push(double time, std::uint32_t kind, std::uint32_t target, std::uint32_t version = 0) {
    time += 0.0;  // -0 becomes +0
    const std::uint64_t key = std::bit_cast<std::uint64_t>(time);
    if (!(time >= 0) || key < last_) [[unlikely]]
      refuse(time);
    const int b = key == last_ ? 0 : 64 - std::countl_zero(key ^ last_);
    buckets_[b].push_back(EngineEvent{time, kind, target, version});
    if (b > 0) {
      occupied_ |= std::uint64_t{1} << (b - 1);
      least_[b] = std::min(least_[b], key);
    }
    ++size_;
    ++pushed_;
  }
  EngineEvent pop();  // the earliest; the queue must not be empty
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::uint64_t pushed() const { return pushed_; }

 private:
  [[noreturn]] void refuse(double time) const;
  static constexpr int kBuckets = 65;
  // Bucket 0 holds the events at the last popped time (a FIFO from head0_); bucket b > 0 those whose
  // highest bit differing from it is bit b - 1.
  std::vector<EngineEvent> buckets_[kBuckets];
  std::uint64_t occupied_ = 0;  // bit b - 1: bucket b > 0 holds events
  std::uint64_t least_[kBuckets];  // smallest key in bucket b > 0; all ones when it is empty
  std::size_t head0_ = 0;
  std::uint64_t last_ = 0;
  std::size_t size_ = 0;
  std::uint64_t pushed_ = 0;
};

class Engine {
 public:
  double now() const { return now_; }
  // Schedules an event at `time`; a time before now() throws Runtime (the clock never runs backwards).
  void at(double time, std::uint32_t kind, std::uint32_t target, std::uint32_t version = 0) {
    if (!(time >= now_)) [[unlikely]]
      refuse(time);
    queue_.push(time, kind, target, version);
  }
  void after(double delay, std::uint32_t kind, std::uint32_t target, std::uint32_t version = 0) {
    at(now_ + delay, kind, target, version);
  }
  // Runs events in (time, order of scheduling) order until none is left; the clock is at the event's
  // time when handler(const EngineEvent&) is called, and the handler may schedule more.
  template <class Handler>
  void run(Handler&& handler) {
    while (!queue_.empty()) {
      const EngineEvent e = queue_.pop();
      now_ = e.time;
      ++processed_;
      handler(e);
    }
  }
  std::uint64_t processed() const { return processed_; }
  std::uint64_t scheduled() const { return queue_.pushed(); }
  std::size_t pending() const { return queue_.size(); }
  void reserve(std::size_t events) { queue_.reserve(events); }

 private:
  [[noreturn]] void refuse(double time) const;
  EventQueue queue_;
  double now_ = 0;
  std::uint64_t processed_ = 0;
};

// A serial resource: one job at a time, the others wait in the order they were pushed.
class FifoLane {
 public:
  void reserve(std::size_t jobs) { queue_.reserve(jobs); }
  void push(std::uint32_t job) { queue_.push_back(job); }
  bool busy() const { return busy_; }
  std::size_t waiting() const { return queue_.size() - head_; }
  // When idle with a job waiting: takes it (the lane becomes busy) and returns true.
  bool try_start(std::uint32_t& job);
  std::uint32_t current() const { return current_; }
  void finish() { busy_ = false; }

 private:
  std::vector<std::uint32_t> queue_;
  std::size_t head_ = 0;
  std::uint32_t current_ = 0;
  bool busy_ = false;
};

// Flows on links with fluid bandwidth sharing. A flow of `bytes` started alone on a link of bandwidth
// bw and latency lat arrives after bytes / bw + lat: its bytes drain first, at an equal share of the
// bandwidth with the other flows draining on the link at each instant, then the latency passes (the
// flow is off the link by then). When a flow joins or leaves, the bytes the others have left are
// brought up to date, their rates recomputed and their events re-issued with a new version, so the
// superseded events are recognised. A flow alone on its link costs one event; leaving a shared link
// costs one more. Flow slots are recycled, so memory follows the flows in flight, not all flows.
// A link of infinite bandwidth, or a flow of zero bytes, takes the latency only.
class FluidLinks {
 public:
  int add_link(double bandwidth_bytes_per_s, double latency_s = 0);  // bandwidth > 0 (infinity allowed)
  int links() const { return static_cast<int>(links_.size()); }
  // Starts a flow of `bytes` on `link` now. Its events have kind `kind`; hand each to finish().
  void start(Engine& engine, int link, double bytes, std::uint32_t kind, std::uint32_t tag);
  // For an event of a flow's kind: true when a flow arrived now (its tag in `tag`); false when the
  // event was superseded, or marked a flow leaving a shared link (the rest is handled here).
  bool finish(Engine& engine, const EngineEvent& e, std::uint32_t& tag);
  // Flows on the link: draining, or alone and in their latency.
  int active(int link) const { return static_cast<int>(links_[static_cast<std::size_t>(link)].active.size()); }
  std::size_t flow_slots() const { return flows_.size(); }

 private:
  enum class State : std::uint8_t { Free, OnLink, Arriving };
  struct Link {
    double bandwidth = 0;
    double latency = 0;
    std::vector<std::uint32_t> active;  // flow slots on the link now
  };
  struct Flow {
    double remaining = 0;  // bytes left at `updated`
    double rate = 0;       // bytes per second since `updated`
    double updated = 0;
    double drained = 0;    // when its bytes are through, at the current rate
    double due = -1;       // time of its pending event
    std::uint32_t version = 0;
    std::uint32_t slot = 0;  // index in the link's active list
    std::int32_t link = -1;
    std::uint32_t kind = 0;
    std::uint32_t tag = 0;
    State state = State::Free;
    bool leaving = false;  // the pending event is the drain end on a shared link (not the arrival)
  };
  void schedule(Engine& engine, std::uint32_t id, Flow& f, double due, bool leaving);
  void remove_from_link(Link& link, Flow& f);
  // Brings every flow on the link up to now and re-issues its event at the equal share.
  void retime(Engine& engine, Link& link);
  void release(std::uint32_t id);

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_;
};

}  // namespace pw
