#include "sim/engine.hpp"

#include <bit>
#include <cmath>
#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace pw {
namespace {

inline std::uint64_t key_of(double time) { return std::bit_cast<std::uint64_t>(time); }

inline int bucket_of(std::uint64_t key, std::uint64_t last) {
  return key == last ? 0 : 64 - std::countl_zero(key ^ last);
}

}  // namespace

void EventQueue::refuse(double time) const {
  throw_runtime("simulator: event at {} s pushed before the last one taken ({} s)", time,
                std::bit_cast<double>(last_));
}

EngineEvent EventQueue::pop() {
  std::vector<EngineEvent>& zero = buckets_[0];
  if (head0_ == zero.size()) {
    zero.clear();
    head0_ = 0;
    const int b = 1 + std::countr_zero(occupied_);
    occupied_ &= ~(std::uint64_t{1} << (b - 1));
    std::vector<EngineEvent>& from = buckets_[b];
    last_ = least_[b];
    least_[b] = ~std::uint64_t{0};
    // In order, so that equal times keep their push order.
    for (const EngineEvent& e : from) {
      const std::uint64_t key = key_of(e.time);
      const int to = bucket_of(key, last_);
      buckets_[to].push_back(e);
      if (to > 0) {
        occupied_ |= std::uint64_t{1} << (to - 1);
        least_[to] = std::min(least_[to], key);
      }
    }
    from.clear();
  }
  --size_;
  return zero[head0_++];
}

void Engine::refuse(double time) const {
  throw_runtime("simulator: event at {} s scheduled in the past (now {} s)", time, now_);
}

bool FifoLane::try_start(std::uint32_t& job) {
  if (busy_ || head_ == queue_.size()) return false;
  job = current_ = queue_[head_++];
  busy_ = true;
  if (head_ == queue_.size()) {  // drained: reuse the storage
    queue_.clear();
    head_ = 0;
  }
  return true;
}

int FluidLinks::add_link(double bandwidth_bytes_per_s, double latency_s) {
  if (!(bandwidth_bytes_per_s > 0))
    throw_bad_input("link bandwidth {} B/s: must be > 0 (give the link a positive bandwidth)", bandwidth_bytes_per_s);
  if (!(latency_s >= 0) || std::isinf(latency_s))
    throw_bad_input("link latency {} s: must be a finite number >= 0", latency_s);
  links_.push_back(Link{bandwidth_bytes_per_s, latency_s, {}});
  return static_cast<int>(links_.size()) - 1;
}

void FluidLinks::schedule(Engine& engine, std::uint32_t id, Flow& f, double due, bool leaving) {
  f.due = due;
  f.leaving = leaving;
  engine.at(due, f.kind, id, ++f.version);
}

void FluidLinks::remove_from_link(Link& link, Flow& f) {
  const std::uint32_t last = link.active.back();
  link.active[f.slot] = last;
  flows_[last].slot = f.slot;
  link.active.pop_back();
}

void FluidLinks::release(std::uint32_t id) {
  flows_[id].state = State::Free;
  free_.push_back(id);
}

void FluidLinks::start(Engine& engine, int link_index, double bytes, std::uint32_t kind, std::uint32_t tag) {
  std::uint32_t id;
  if (free_.empty()) {
    id = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_.back();
    free_.pop_back();
  }
  Link& link = links_[static_cast<std::size_t>(link_index)];
  Flow& f = flows_[id];
  const double now = engine.now();
  f.kind = kind;
  f.tag = tag;
  f.link = link_index;
  f.remaining = bytes;
  f.updated = now;
  if (bytes <= 0 || std::isinf(link.bandwidth)) {
    f.state = State::Arriving;
    schedule(engine, id, f, now + link.latency, false);
    return;
  }
  f.state = State::OnLink;
  // A flow left alone whose bytes are through is only waiting out its latency: it no longer shares.
  if (link.active.size() == 1) {
    Flow& lone = flows_[link.active.front()];
    if (lone.drained <= now) {
      remove_from_link(link, lone);
      lone.state = State::Arriving;  // its pending event is its arrival
    }
  }
  f.slot = static_cast<std::uint32_t>(link.active.size());
  link.active.push_back(id);
  if (link.active.size() == 1) {  // alone: nothing else to re-time
    f.rate = link.bandwidth;
    f.drained = now + bytes / f.rate;
    schedule(engine, id, f, f.drained + link.latency, false);
    return;
  }
  f.rate = 0;  // retime() gives it its share
  f.due = -1;
  retime(engine, link);
}

bool FluidLinks::finish(Engine& engine, const EngineEvent& e, std::uint32_t& tag) {
  Flow& f = flows_[e.target];
  if (e.version != f.version || f.state == State::Free) return false;
  if (f.state == State::OnLink) {
    Link& link = links_[static_cast<std::size_t>(f.link)];
    remove_from_link(link, f);
    f.remaining = 0;
    if (!link.active.empty()) retime(engine, link);
    if (f.leaving && link.latency > 0) {
      f.state = State::Arriving;
      schedule(engine, e.target, f, engine.now() + link.latency, false);
      return false;
    }
  }
  tag = f.tag;
  release(e.target);
  return true;
}

void FluidLinks::retime(Engine& engine, Link& link) {
  const double now = engine.now();
  const double rate = link.bandwidth / static_cast<double>(link.active.size());
  const bool shared = link.active.size() > 1;
  for (std::uint32_t id : link.active) {
    Flow& f = flows_[id];
    f.remaining -= f.rate * (now - f.updated);
    if (f.remaining < 0) f.remaining = 0;  // rounding
    f.updated = now;
    f.rate = rate;
    f.drained = now + f.remaining / rate;
    const double due = shared ? f.drained : f.drained + link.latency;
    if (due == f.due && shared == f.leaving) continue;  // e.g. flows that end together: the event holds
    schedule(engine, id, f, due, shared);
  }
}

}  // namespace pw
