#include "sim/engine.hpp"

#include <cmath>
#include <utility>

#include "core/error.hpp"

namespace pw {
namespace {

inline bool earlier(const EngineEvent& a, const EngineEvent& b) {
  return a.time < b.time || (a.time == b.time && a.seq < b.seq);
}

constexpr std::int32_t kNoLink = -1;   // not started, or done
constexpr std::int32_t kInstant = -2;  // completes at once, never joins a link

}  // namespace

void EventQueue::push(double time, std::uint32_t kind, std::uint32_t target, std::uint32_t version) {
  EngineEvent e{time, next_seq_++, kind, target, version};
  // Sift up with a hole instead of swaps: one copy per level.
  std::size_t i = heap_.size();
  heap_.push_back(e);
  EngineEvent* h = heap_.data();
  while (i > 0) {
    std::size_t parent = (i - 1) / 2;
    if (!earlier(e, h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

EngineEvent EventQueue::pop() {
  EngineEvent out = heap_.front();
  EngineEvent last = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  if (n == 0) return out;
  EngineEvent* h = heap_.data();
  std::size_t i = 0;
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && earlier(h[child + 1], h[child])) ++child;
    if (!earlier(h[child], last)) break;
    h[i] = h[child];
    i = child;
  }
  h[i] = last;
  return out;
}

void Engine::at(double time, std::uint32_t kind, std::uint32_t target, std::uint32_t version) {
  if (!(time >= now_)) throw_runtime("simulator: event at {} s scheduled in the past (now {} s)", time, now_);
  queue_.push(time, kind, target, version);
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

int FluidLinks::add_link(double bandwidth_bytes_per_s) {
  if (!(bandwidth_bytes_per_s > 0))
    throw_bad_input("link bandwidth {} B/s: must be > 0 (give the link a positive bandwidth)", bandwidth_bytes_per_s);
  links_.push_back(Link{bandwidth_bytes_per_s, {}});
  return static_cast<int>(links_.size()) - 1;
}

void FluidLinks::resize_flows(std::size_t n) { flows_.assign(n, Flow{}); }

void FluidLinks::start(Engine& engine, std::uint32_t flow, int link_index, double bytes, std::uint32_t kind) {
  Flow& f = flows_[flow];
  Link& link = links_[static_cast<std::size_t>(link_index)];
  f.kind = kind;
  f.remaining = bytes;
  f.updated = engine.now();
  if (bytes <= 0 || std::isinf(link.bandwidth)) {
    f.link = kInstant;
    engine.at(engine.now(), kind, flow, ++f.version);
    return;
  }
  f.link = link_index;
  f.slot = static_cast<std::uint32_t>(link.active.size());
  if (link.active.empty()) {  // alone on the link: nothing else to re-time
    link.active.push_back(flow);
    f.rate = link.bandwidth;
    f.due = engine.now() + bytes / f.rate;
    engine.at(f.due, kind, flow, ++f.version);
    return;
  }
  link.active.push_back(flow);
  f.rate = 0;  // retime() gives it its share
  f.due = -1;
  retime(engine, link);
}

bool FluidLinks::finish(Engine& engine, const EngineEvent& e) {
  Flow& f = flows_[e.target];
  if (e.version != f.version || f.link == kNoLink) return false;
  if (f.link == kInstant) {
    f.link = kNoLink;
    f.remaining = 0;
    return true;
  }
  Link& link = links_[static_cast<std::size_t>(f.link)];
  const std::uint32_t last = link.active.back();
  link.active[f.slot] = last;
  flows_[last].slot = f.slot;
  link.active.pop_back();
  f.link = kNoLink;
  f.remaining = 0;
  if (!link.active.empty()) retime(engine, link);
  return true;
}

void FluidLinks::retime(Engine& engine, Link& link) {
  const double now = engine.now();
  const double rate = link.bandwidth / static_cast<double>(link.active.size());
  for (std::uint32_t id : link.active) {
    Flow& f = flows_[id];
    f.remaining -= f.rate * (now - f.updated);
    if (f.remaining < 0) f.remaining = 0;  // rounding
    f.updated = now;
    f.rate = rate;
    const double due = now + f.remaining / rate;
    if (due == f.due) continue;  // e.g. flows that end together: the pending event still holds
    f.due = due;
    engine.at(due, f.kind, id, ++f.version);
  }
}

}  // namespace pw
