#include "executor/record_wire.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/error.hpp"

namespace pw {
namespace {

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  std::vector<std::byte> out;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> wire) : wire_(wire) {}
  template <typename T>
  T get() {
    if (at_ + sizeof(T) > wire_.size())
      throw_runtime("a rank's records ended after {} of their bytes; the processes run different builds?", at_);
    T v;
    std::memcpy(&v, wire_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  bool done() const { return at_ == wire_.size(); }

 private:
  std::span<const std::byte> wire_;
  size_t at_ = 0;
};

}  // namespace

std::vector<std::byte> rank_records_to_wire(int rank, const std::vector<IterationRecord>& iterations, double peak_bytes) {
  Writer w;
  w.put<std::int32_t>(rank);
  w.put(peak_bytes);
  w.put<std::int64_t>(static_cast<std::int64_t>(iterations.size()));
  for (const IterationRecord& it : iterations) {
    const RankIteration& r = it.ranks.at(static_cast<size_t>(rank));
    w.put(r.busy_s);
    w.put(r.busy_cpu_s);
    w.put(r.end_s);
    w.put(r.activation_peak_bytes);
    w.put<std::int64_t>(static_cast<std::int64_t>(r.events.size()));
    for (const SimEvent& e : r.events) {
      w.put<std::int32_t>(e.rank);
      w.put<std::int32_t>(static_cast<std::int32_t>(e.lane));
      static_assert(std::is_trivially_copyable_v<Action>);
      w.put(e.action);
      w.put(e.start_s);
      w.put(e.end_s);
      w.put(e.bytes);
      w.put<std::int64_t>(e.flow_id);
    }
    w.put<std::int64_t>(static_cast<std::int64_t>(r.memory.size()));
    for (const MemorySample& m : r.memory) {
      w.put(m.time_s);
      w.put(m.bytes);
    }
  }
  return std::move(w.out);
}

RankRecordsHeader rank_records_from_wire(std::span<const std::byte> wire, std::vector<IterationRecord>& iterations) {
  Reader rd(wire);
  RankRecordsHeader h;
  h.rank = rd.get<std::int32_t>();
  h.peak_bytes = rd.get<double>();
  const auto count = rd.get<std::int64_t>();
  if (count != static_cast<std::int64_t>(iterations.size()))
    throw_runtime("rank {} ran {} iterations, this process {}", h.rank, count, iterations.size());
  for (IterationRecord& it : iterations) {
    if (h.rank < 0 || h.rank >= static_cast<int>(it.ranks.size()))
      throw_runtime("records of rank {} arrived for a run of {} ranks", h.rank, it.ranks.size());
    RankIteration& r = it.ranks[static_cast<size_t>(h.rank)];
    r.busy_s = rd.get<double>();
    r.busy_cpu_s = rd.get<double>();
    r.end_s = rd.get<double>();
    r.activation_peak_bytes = rd.get<double>();
    r.events.resize(static_cast<size_t>(rd.get<std::int64_t>()));
    for (SimEvent& e : r.events) {
      e.rank = rd.get<std::int32_t>();
      e.lane = static_cast<Lane>(rd.get<std::int32_t>());
      e.action = rd.get<Action>();
      e.start_s = rd.get<double>();
      e.end_s = rd.get<double>();
      e.bytes = rd.get<double>();
      e.flow_id = static_cast<long>(rd.get<std::int64_t>());
    }
    r.memory.resize(static_cast<size_t>(rd.get<std::int64_t>()));
    for (MemorySample& m : r.memory) {
      m.time_s = rd.get<double>();
      m.bytes = rd.get<double>();
    }
  }
  if (!rd.done()) throw_runtime("rank {}'s records carry more bytes than their iterations", h.rank);
  return h;
}

}  // namespace pw
