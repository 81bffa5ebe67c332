// What crosses between processes: boundary tensors as bytes and back, and a rank's records for process 0.
#include <catch2/catch.hpp>

#include <cstring>

#include "core/error.hpp"
#include "executor/host_tensor.hpp"
#include "executor/message_wire.hpp"
#include "executor/record_wire.hpp"
#include "executor/sleep_backend.hpp"

using namespace pw;

namespace {

std::vector<std::byte> wire_of(const Tensor& t) {
  std::vector<std::byte> out;
  t.append_wire(out);
  return out;
}

// A tensor of a backend that keeps its tensors to itself.
class LocalOnly : public Tensor {
 public:
  double bytes() const override { return 8; }
  TensorPtr clone() const override { return std::make_shared<LocalOnly>(); }
};

}  // namespace

TEST_CASE("a host tensor crosses as its floats and comes back equal, whichever host backend rebuilds it") {
  Mat m(3, 5);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = 0.1f * static_cast<float>(i) - 0.7f;
  const HostTensor t(m);
  const std::vector<std::byte> wire = wire_of(t);
  // A 4-byte tag, rows and columns as 8-byte integers, then 15 floats.
  CHECK(wire.size() == 4 + 8 + 8 + 15 * 4);
  SleepBackend backend({});
  const TensorPtr back = backend.tensor_from_wire(wire);
  REQUIRE(back);
  CHECK(back->bytes() == t.bytes());
  CHECK(static_cast<const HostTensor&>(*back).value == m);  // bit for bit

  const HostTensor empty(Mat(0, 4));
  const TensorPtr none = backend.tensor_from_wire(wire_of(empty));
  CHECK(static_cast<const HostTensor&>(*none).value.rows() == 0);
  CHECK(static_cast<const HostTensor&>(*none).value.cols() == 4);
}

TEST_CASE("bytes a backend cannot read, and tensors that cannot leave their process, are runtime errors") {
  SleepBackend backend({});
  const std::vector<std::byte> junk(10, std::byte{7});
  try {
    backend.tensor_from_wire(junk);
    FAIL("junk was read");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK(std::string(e.what()) == "a tensor of 10 bytes arrived in a form the sleep backend cannot read");
  }
  std::vector<std::byte> cut = wire_of(HostTensor(Mat::Ones(2, 2)));
  cut.resize(cut.size() - 4);
  CHECK_THROWS_WITH(backend.tensor_from_wire(cut), "a host tensor of 2 x 2 floats arrived with 12 bytes of data");
  std::vector<std::byte> out;
  CHECK_THROWS_WITH(LocalOnly().append_wire(out),
                    "this backend's tensors cannot be sent to another process; run the ranks as threads");
}

TEST_CASE("a rank's records cross to process 0 whole") {
  std::vector<IterationRecord> sent(2), received(2);
  for (int it = 0; it < 2; ++it) {
    sent[static_cast<size_t>(it)].ranks.resize(3);
    received[static_cast<size_t>(it)].ranks.resize(3);
    RankIteration& r = sent[static_cast<size_t>(it)].ranks[2];
    r.busy_s = 0.25 + it;
    r.busy_cpu_s = 0.125;
    r.end_s = 1.5;
    r.activation_peak_bytes = 4096;
    SimEvent e;
    e.rank = 2;
    e.lane = Lane::Recv;
    e.action = Action{Op::RecvF, 2, 3};
    e.start_s = 0.5;
    e.end_s = 0.75;
    e.bytes = 1024;
    e.flow_id = 17;
    r.events = {e, SimEvent{}};
    r.memory = {{0.0, 0.0}, {0.5, 4096.0}};
  }
  const std::vector<std::byte> wire = rank_records_to_wire(2, sent, 8192);
  const RankRecordsHeader h = rank_records_from_wire(wire, received);
  CHECK(h.rank == 2);
  CHECK(h.peak_bytes == 8192);
  for (int it = 0; it < 2; ++it) {
    const RankIteration& a = sent[static_cast<size_t>(it)].ranks[2];
    const RankIteration& b = received[static_cast<size_t>(it)].ranks[2];
    CHECK(b.busy_s == a.busy_s);
    CHECK(b.busy_cpu_s == a.busy_cpu_s);
    CHECK(b.end_s == a.end_s);
    CHECK(b.activation_peak_bytes == a.activation_peak_bytes);
    CHECK(b.events == a.events);
    REQUIRE(b.memory.size() == 2);
    CHECK(b.memory[1].time_s == 0.5);
    CHECK(b.memory[1].bytes == 4096);
    CHECK(received[static_cast<size_t>(it)].ranks[0].events.empty());  // the other ranks' entries untouched
  }
  // A run of another length cannot take them.
  std::vector<IterationRecord> three(3);
  for (IterationRecord& r : three) r.ranks.resize(3);
  CHECK_THROWS_WITH(rank_records_from_wire(wire, three), "rank 2 ran 2 iterations, this process 3");
}

namespace {

std::vector<std::byte> host_header(std::int64_t rows, std::int64_t cols) {
  std::vector<std::byte> out(20);
  const std::uint32_t tag = 0x54485750;
  std::memcpy(out.data(), &tag, 4);
  std::memcpy(out.data() + 4, &rows, 8);
  std::memcpy(out.data() + 12, &cols, 8);
  return out;
}

}  // namespace

TEST_CASE("a host tensor's sizes must account for its bytes: no overflow, no allocation beyond the message") {
  // rows x cols x 4 wraps to 0 in 64 bits: it once passed the length check and sized a matrix of 2^62 floats.
  CHECK_THROWS_WITH(host_tensor_from_wire(host_header(std::int64_t{1} << 31, std::int64_t{1} << 31)),
                    "a host tensor of 2147483648 x 2147483648 floats arrived with 0 bytes of data");
  CHECK_THROWS_WITH(host_tensor_from_wire(host_header(-2, -2)), "a host tensor of -2 x -2 floats arrived with 0 bytes of data");
  std::vector<std::byte> wire = host_header(std::int64_t{1} << 40, 1);
  wire.resize(wire.size() + 16);
  CHECK_THROWS_WITH(host_tensor_from_wire(wire), "a host tensor of 1099511627776 x 1 floats arrived with 16 bytes of data");
}

TEST_CASE("a tensor message's header is checked before its key or send time are used") {
  SleepBackend backend({});
  const Clock::time_point now = Clock::now();
  const std::vector<std::byte> good = message_to_wire(MessageKey{1, Op::SendB, 2, 3}, Message{nullptr, now, 9}, now);
  const WireMessage w = message_from_wire(good, backend, now, 4);
  CHECK(w.key == MessageKey{1, Op::SendB, 2, 3});
  CHECK(w.message.flow_id == 9);
  CHECK(w.message.sent == now);
  CHECK_THROWS_WITH(message_from_wire(std::span(good).first(10), backend, now, 4),
                    "a message of 10 bytes from rank 4 is too short for a tensor's header");
  // Fields at their offsets: iteration, op, stage, micro-batch (4 bytes each), flow id, send time (8 each).
  const auto with = [&](size_t at, auto value) {
    std::vector<std::byte> bad = good;
    std::memcpy(bad.data() + at, &value, sizeof value);
    return bad;
  };
  const std::string different = "; the processes run different builds?";
  CHECK_THROWS_WITH(message_from_wire(with(4, std::int32_t{99}), backend, now, 4),
                    "a message from rank 4 has a header no pipewright sends (operation 99, iteration 1, stage 2, "
                    "micro-batch 3)" + different);
  CHECK_THROWS_WITH(message_from_wire(with(4, static_cast<std::int32_t>(Op::F)), backend, now, 4),
                    "a message from rank 4 has a header no pipewright sends (operation 0, iteration 1, stage 2, "
                    "micro-batch 3)" + different);
  CHECK_THROWS_WITH(message_from_wire(with(8, std::int32_t{-1}), backend, now, 4),
                    "a message from rank 4 has a header no pipewright sends (operation 7, iteration 1, stage -1, "
                    "micro-batch 3)" + different);
  // A send time of 2^62 ns would overflow the clock once added to the last meeting.
  CHECK_THROWS_WITH(message_from_wire(with(24, std::int64_t{1} << 62), backend, now, 4),
                    "a message from rank 4 has a header no pipewright sends (operation 7, iteration 1, stage 2, "
                    "micro-batch 3)" + different);
}

TEST_CASE("a rank's records: counts beyond the bytes that carry them, unknown lanes and ranks are refused") {
  std::vector<IterationRecord> sent(1), received(1);
  sent[0].ranks.resize(2);
  received[0].ranks.resize(2);
  SimEvent e;
  e.rank = 1;
  sent[0].ranks[1].events = {e};
  sent[0].ranks[1].memory = {{0.0, 1.0}};
  const std::vector<std::byte> good = rank_records_to_wire(1, sent, 8);
  rank_records_from_wire(good, received);
  CHECK(received[0].ranks[1].events == sent[0].ranks[1].events);

  // Rank (4), peak (8), iterations (8), then busy, cpu, end, peak (8 each): the event count sits at 52.
  const auto with = [&](size_t at, auto value) {
    std::vector<std::byte> bad = good;
    std::memcpy(bad.data() + at, &value, sizeof value);
    return bad;
  };
  const std::string different = "; the processes run different builds?";
  CHECK_THROWS_WITH(rank_records_from_wire(with(52, std::int64_t{1} << 40), received),
                    "rank 1's records announce 1099511627776 events in " + std::to_string(good.size() - 60) +
                        " bytes left" + different);
  CHECK_THROWS_WITH(rank_records_from_wire(with(52, std::int64_t{-1}), received),
                    "rank 1's records announce -1 events in " + std::to_string(good.size() - 60) + " bytes left" +
                        different);
  // The memory sample count follows the one event (4 + 4 + 20 + 8 + 8 + 8 + 8 bytes).
  CHECK_THROWS_WITH(rank_records_from_wire(with(60 + 60, std::int64_t{1} << 60), received),
                    "rank 1's records announce 1152921504606846976 memory samples in 16 bytes left" + different);
  CHECK_THROWS_WITH(rank_records_from_wire(with(60 + 4, std::int32_t{7}), received),
                    "rank 1's records hold an event of lane 7 and operation 0, which this build does not know" + different);
  CHECK_THROWS_WITH(rank_records_from_wire(with(0, std::int32_t{5}), received), "records of rank 5 arrived for a run of 2 ranks");
  CHECK_THROWS_WITH(rank_records_from_wire(with(0, std::int32_t{-1}), received), "records of rank -1 arrived for a run of 2 ranks");
}
