// What crosses between processes: boundary tensors as bytes and back, and a rank's records for process 0.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "executor/host_tensor.hpp"
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
