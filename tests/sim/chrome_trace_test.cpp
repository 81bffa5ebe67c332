// The Chrome trace / Perfetto writer: schema, metadata, units, flows, memory counter, file round trip.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim_test_util.hpp"
#include "../temp_folder.hpp"

using namespace pw;
using namespace pw::test;
using nlohmann::json;

namespace {

// Both observers at once: the writer under test and a recorder to compare with.
class Both : public SimObserver {
 public:
  Both(SimObserver& a, SimObserver& b) : a_(a), b_(b) {}
  void on_start(int r) override { a_.on_start(r), b_.on_start(r); }
  void on_event(const SimEvent& e) override { a_.on_event(e), b_.on_event(e); }
  void on_memory(int r, double t, double b) override { a_.on_memory(r, t, b), b_.on_memory(r, t, b); }
  void on_finish(double s) override { a_.on_finish(s), b_.on_finish(s); }

 private:
  SimObserver& a_;
  SimObserver& b_;
};

std::vector<json> with_ph(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("chrome trace: one X event per simulated event, in microseconds, with args", "[sim][trace]") {
  // 1F1B p = 2, m = 2, F = 1 ms, B + W = 2 ms, 1 MB over 25 GB/s + 5 us (45 us per transfer).
  ChromeTraceWriter writer(json{{"schedule", "1f1b"}});
  Recorder rec;
  Both both(writer, rec);
  const SimResult r = simulate(sim_input(generated("1f1b", 2, 2), uniform_costs(2, 1e-3, 1.5e-3, 0.5e-3, 4096, 0, 1e6),
                                         one_node_cluster(25e9, 5e-6)),
                               &both);
  const json t = writer.trace();
  CHECK(t["displayTimeUnit"] == "ms");
  CHECK(t["otherData"]["schedule"] == "1f1b");
  CHECK(t["otherData"]["step_time_s"] == r.step_time_s);

  const auto xs = with_ph(t, "X");
  REQUIRE(xs.size() == rec.events().size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const SimEvent& e = rec.events()[i];
    const json& x = xs[i];
    CHECK(x["pid"] == e.rank);
    CHECK(x["tid"] == static_cast<int>(e.lane));
    CHECK(x["cat"] == to_string(e.lane));
    CHECK(x["ts"].get<double>() == Approx(e.start_s * 1e6).margin(1e-3));
    if (e.lane == Lane::Optimizer) {
      CHECK(x["name"] == "optimizer step");
      CHECK(x["args"] == json{{"op", "optimizer_step"}, {"predicted_us", x["dur"]}});
      continue;
    }
    CHECK(x["name"] == to_text(e.action));
    CHECK(x["dur"].get<double>() == Approx((e.end_s - e.start_s) * 1e6).margin(2e-3));
    CHECK(x["args"]["stage"] == e.action.stage);
    CHECK(x["args"]["microbatch"] == e.action.microbatch);
    CHECK(x["args"]["op"] == to_string(e.action.op));
    if (e.lane != Lane::Compute) CHECK(x["args"]["bytes"] == e.bytes);
  }
  // The first forward on rank 0: ts 0, dur 1000 us; its send: 45 us.
  CHECK(xs[0]["name"] == "0F0");
  CHECK(xs[0]["dur"] == 1000.0);
  for (const json& x : xs)
    if (x["name"] == "0SEND_F0") CHECK(x["dur"] == 45.0);
}

TEST_CASE("chrome trace: rank and lane names, flows from send to receive, memory counter", "[sim][trace]") {
  // Interleaved p = 2, v = 2: rank 0 holds stages 0 and 2, rank 1 stages 1 and 3.
  ChromeTraceWriter writer;
  Recorder rec;
  Both both(writer, rec);
  simulate(sim_input(generated("interleaved", 2, 2, 2), uniform_costs(4, 1e-3, 1e-3, 1e-3, 100, 0, 1e5),
                     one_node_cluster(1e9, 1e-6)),
           &both);
  writer.set_rank_label(1, "rank 1 (stages 1, 3, node 0)");
  const json t = writer.trace();

  std::map<std::pair<int, int>, std::string> threads;
  std::map<int, std::string> processes;
  for (const json& m : with_ph(t, "M")) {
    if (m["name"] == "process_name") processes[m["pid"]] = m["args"]["name"];
    if (m["name"] == "thread_name") threads[{m["pid"], m["tid"]}] = m["args"]["name"];
  }
  CHECK(processes == std::map<int, std::string>{{0, "rank 0 (stages 0, 2)"}, {1, "rank 1 (stages 1, 3, node 0)"}});
  CHECK(threads[{0, 0}] == "compute");
  CHECK(threads[{1, 1}] == "send");
  CHECK(threads[{1, 2}] == "recv");
  CHECK(threads[{0, 3}] == "collective");
  CHECK(threads[{1, 4}] == "optimizer");
  CHECK(threads.size() == 10);

  // Every flow id starts once on a send lane and finishes once on the receive lane of the other rank.
  std::map<long, json> starts, finishes;
  for (const json& s : with_ph(t, "s")) CHECK(starts.emplace(s["id"].get<long>(), s).second);
  for (const json& f : with_ph(t, "f")) CHECK(finishes.emplace(f["id"].get<long>(), f).second);
  REQUIRE(starts.size() == finishes.size());
  REQUIRE(!starts.empty());
  for (const auto& [id, s] : starts) {
    const json& f = finishes.at(id);
    CHECK(s["tid"] == 1);
    CHECK(f["tid"] == 2);
    CHECK(s["pid"] != f["pid"]);
    CHECK(f["ts"].get<double>() >= s["ts"].get<double>());
    CHECK(f["bp"] == "e");
  }

  const auto counters = with_ph(t, "C");
  REQUIRE(counters.size() == rec.memory().size());
  for (size_t i = 0; i < counters.size(); ++i) {
    CHECK(counters[i]["name"] == "memory");
    CHECK(counters[i]["pid"] == rec.memory()[i].rank);
    CHECK(counters[i]["args"]["bytes"] == rec.memory()[i].bytes_in_use);
  }
}

TEST_CASE("chrome trace: collective events and the file round trip", "[sim][trace]") {
  ChromeTraceWriter writer;
  SimInput in = sim_input(generated("1f1b", 2, 2), uniform_costs(2, 1, 1, 1), ideal_cluster());
  in.stages[1].grad_reduce_s = 0.5;
  in.stages[1].grad_reduce_bytes = 4e6;
  simulate(in, &writer);
  const json t = writer.trace();
  bool found = false;
  for (const json& x : with_ph(t, "X"))
    if (x["cat"] == "collective") {
      found = true;
      CHECK(x["name"] == "grad_reduce stage 1");
      CHECK(x["pid"] == 1);
      CHECK(x["dur"] == 500000.0);
      CHECK(x["args"]["op"] == "grad_reduce");
      CHECK(x["args"]["bytes"] == 4e6);
    }
  CHECK(found);

  const auto path = std::filesystem::temp_directory_path() / "pipewright_sim_trace_test.json";
  writer.write(path.string());
  CHECK(json::parse(file_contents(path)) == t);
  std::filesystem::remove(path);
}

TEST_CASE("chrome trace: an unwritable path is a runtime error naming it", "[sim][trace]") {
  ChromeTraceWriter writer;
  try {
    // Under a file: no folder can be made there.
    writer.write("/dev/null/trace.json");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK(std::string(e.what()) == "cannot write '/dev/null/trace.json': Not a directory");
  }
}
