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
  // A count of items of `item_bytes` each: refused unless the bytes left can hold that many, so a count
  // never sizes a vector beyond the message that carried it.
  size_t count(size_t item_bytes, int rank, const char* what) {
    const auto n = get<std::int64_t>();
    if (n < 0 || static_cast<std::uint64_t>(n) > (wire_.size() - at_) / item_bytes)
      throw_runtime("rank {}'s records announce {} {} in {} bytes left; the processes run different builds?", rank, n,
                    what, wire_.size() - at_);
    return static_cast<size_t>(n);
  }
  bool done() const { return at_ == wire_.size(); }

 private:
  std::span<const std::byte> wire_;
  size_t at_ = 0;
};

// What one event and one memory sample take on the wire (as rank_records_to_wire writes them).
constexpr size_t kEventBytes = 2 * sizeof(std::int32_t) + sizeof(Action) + 3 * sizeof(double) + sizeof(std::int64_t);
constexpr size_t kSampleBytes = 2 * sizeof(double);

void check_event(const SimEvent& e, int rank) {
  const auto lane = static_cast<int>(e.lane), op = static_cast<int>(e.action.op);
  if (lane < static_cast<int>(Lane::Compute) || lane > static_cast<int>(Lane::Optimizer) ||
      op < static_cast<int>(Op::F) || op > static_cast<int>(Op::RecvB))
    throw_runtime("rank {}'s records hold an event of lane {} and operation {}, which this build does not know; the "
                  "processes run different builds?",
                  rank, lane, op);
}

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
  const size_t ranks = iterations.empty() ? 0 : iterations.front().ranks.size();
  if (h.rank < 0 || static_cast<size_t>(h.rank) >= ranks)
    throw_runtime("records of rank {} arrived for a run of {} ranks", h.rank, ranks);
  for (IterationRecord& it : iterations) {
    RankIteration& r = it.ranks.at(static_cast<size_t>(h.rank));
    r.busy_s = rd.get<double>();
    r.busy_cpu_s = rd.get<double>();
    r.end_s = rd.get<double>();
    r.activation_peak_bytes = rd.get<double>();
    r.events.resize(rd.count(kEventBytes, h.rank, "events"));
    for (SimEvent& e : r.events) {
      e.rank = rd.get<std::int32_t>();
      e.lane = static_cast<Lane>(rd.get<std::int32_t>());
      e.action = rd.get<Action>();
      e.start_s = rd.get<double>();
      e.end_s = rd.get<double>();
      e.bytes = rd.get<double>();
      e.flow_id = static_cast<long>(rd.get<std::int64_t>());
      check_event(e, h.rank);
    }
    r.memory.resize(rd.count(kSampleBytes, h.rank, "memory samples"));
    for (MemorySample& m : r.memory) {
      m.time_s = rd.get<double>();
      m.bytes = rd.get<double>();
    }
  }
  if (!rd.done()) throw_runtime("rank {}'s records carry more bytes than their iterations", h.rank);
  return h;
}

}  // namespace pw
