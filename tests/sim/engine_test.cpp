// The discrete-event kernel alone: queue order, clock, serial lanes and fluid link sharing.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "sim/engine.hpp"

using namespace pw;

TEST_CASE("event queue pops by time, then by scheduling order", "[engine]") {
  EventQueue q;
  q.push(3.0, 0, 30);
  q.push(1.0, 0, 10);
  q.push(2.0, 0, 20);
  q.push(1.0, 0, 11);  // same time as target 10, scheduled later: comes after it
  q.push(1.0, 0, 12);
  std::vector<std::uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().target);
  CHECK(order == std::vector<std::uint32_t>{10, 11, 12, 20, 30});
  CHECK(q.pushed() == 5);
}

TEST_CASE("event queue sorts many events like a stable sort on time", "[engine]") {
  // A linear congruential sequence of times with many repeats; the expected order is a stable sort of
  // (time, index), which is exactly (time, push order).
  EventQueue q;
  std::vector<std::pair<double, std::uint32_t>> expected;
  std::uint32_t x = 12345;
  for (std::uint32_t i = 0; i < 2000; ++i) {
    x = x * 1103515245u + 12345u;
    double t = static_cast<double>((x >> 16) % 97);
    q.push(t, 0, i);
    expected.emplace_back(t, i);
  }
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [t, i] : expected) {
    EngineEvent e = q.pop();
    REQUIRE(e.time == t);
    REQUIRE(e.target == i);
  }
  CHECK(q.empty());
}

TEST_CASE("event queue refuses a time before the last one taken", "[engine]") {
  // It is a monotone queue (a radix heap): what a simulation is, since no event is scheduled in the past.
  EventQueue q;
  q.push(2.0, 0, 0);
  CHECK(q.pop().time == 2.0);
  q.push(2.0, 0, 1);  // the same time is fine
  try {
    q.push(1.0, 0, 2);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK(std::string(e.what()) == "simulator: event at 1 s pushed before the last one taken (2 s)");
  }
  CHECK(q.size() == 1);
}

TEST_CASE("event queue keeps push order among equal times across refills", "[engine]") {
  // Interleave pushes and pops: events at equal times, pushed before and after the queue moved on to
  // that time, still come out in push order.
  EventQueue q;
  q.push(1.0, 0, 0);
  q.push(5.0, 0, 1);
  q.push(3.0, 0, 2);
  CHECK(q.pop().target == 0u);
  q.push(3.0, 0, 3);
  q.push(5.0, 0, 4);
  CHECK(q.pop().target == 2u);
  q.push(3.0, 0, 5);
  q.push(5.0, 0, 6);
  std::vector<std::uint32_t> rest;
  while (!q.empty()) rest.push_back(q.pop().target);
  CHECK(rest == std::vector<std::uint32_t>{3, 5, 1, 4, 6});
}

TEST_CASE("engine advances the clock and lets handlers schedule more", "[engine]") {
  // A chain: each event at t schedules the next at t + 0.5 until four have run; the clock reads each
  // event's time in the handler.
  Engine engine;
  engine.at(1.0, 7, 0);
  std::vector<double> seen;
  engine.run([&](const EngineEvent& e) {
    CHECK(e.kind == 7u);
    seen.push_back(engine.now());
    if (e.target < 3) engine.after(0.5, 7, e.target + 1);
  });
  CHECK(seen == std::vector<double>{1.0, 1.5, 2.0, 2.5});
  CHECK(engine.processed() == 4);
  CHECK(engine.now() == 2.5);
}

TEST_CASE("engine refuses an event in the past", "[engine]") {
  Engine engine;
  engine.at(2.0, 0, 0);
  engine.run([&](const EngineEvent&) {
    try {
      engine.at(1.0, 0, 1);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Runtime);
      CHECK(std::string(e.what()) == "simulator: event at 1 s scheduled in the past (now 2 s)");
    }
  });
}

TEST_CASE("fifo lane runs one job at a time in push order", "[engine]") {
  FifoLane lane;
  std::uint32_t job = 99;
  CHECK_FALSE(lane.try_start(job));
  lane.push(4);
  lane.push(5);
  REQUIRE(lane.try_start(job));
  CHECK(job == 4u);
  CHECK(lane.busy());
  CHECK_FALSE(lane.try_start(job));  // busy
  lane.push(6);
  lane.finish();
  REQUIRE(lane.try_start(job));
  CHECK(job == 5u);
  lane.finish();
  REQUIRE(lane.try_start(job));
  CHECK(job == 6u);
  CHECK(lane.waiting() == 0);
}

namespace {
// Runs flows to completion: events of kind 0 belong to the links, kind 1 starts a flow of 100 B on link 0
// whose tag is the event's target. Returns each tag's arrival time and counts the events that brought none.
struct FlowRun {
  std::vector<double> done;
  int other = 0;
};

FlowRun run_flows(FluidLinks& links, Engine& engine, std::size_t flows) {
  FlowRun r;
  r.done.assign(flows, -1);
  engine.run([&](const EngineEvent& e) {
    if (e.kind == 1) {
      links.start(engine, 0, 100, 0, e.target);
      return;
    }
    std::uint32_t tag = 0;
    if (links.finish(engine, e, tag))
      r.done[tag] = engine.now();
    else
      ++r.other;
  });
  return r;
}
}  // namespace

TEST_CASE("a flow alone on a link takes bytes / bandwidth + latency, in one event", "[engine]") {
  // 100 B at 10 B/s started at t = 0: through at 10 s, plus 2 s latency: arrives at 12 s.
  Engine engine;
  FluidLinks links;
  int link = links.add_link(10, 2);
  links.start(engine, link, 100, 0, 0);
  FlowRun r = run_flows(links, engine, 1);
  CHECK(r.done[0] == 12.0);
  CHECK(r.other == 0);
  CHECK(engine.processed() == 1);
}

TEST_CASE("two flows on one link at once take twice as long", "[engine]") {
  // Each gets 10/2 = 5 B/s for its 100 B: both through at 20 s instead of 10 s, then 2 s latency.
  Engine engine;
  FluidLinks links;
  int link = links.add_link(10, 2);
  links.start(engine, link, 100, 0, 0);
  links.start(engine, link, 100, 0, 1);
  CHECK(links.active(link) == 2);
  FlowRun r = run_flows(links, engine, 2);
  CHECK(r.done[0] == 22.0);
  CHECK(r.done[1] == 22.0);
  // Flow 0's first event (alone: 12 s) was superseded; each left the shared link at 20 s (one event
  // each) and arrived at 22 s.
  CHECK(r.other == 3);
  CHECK(links.active(link) == 0);
}

TEST_CASE("a flow joining later re-times the one already on the link", "[engine]") {
  // Link 10 B/s, no latency. Flow 0 (100 B) starts at 0, alone until 5 s: 50 B left. Flow 1 (100 B)
  // joins at 5 s: both at 5 B/s; flow 0 ends at 5 + 50/5 = 15 s, when flow 1 has 100 - 50 = 50 B left,
  // now alone at 10 B/s: ends at 15 + 50/10 = 20 s.
  Engine engine;
  FluidLinks links;
  links.add_link(10);
  links.start(engine, 0, 100, 0, 0);
  engine.at(5.0, 1, 1);
  FlowRun r = run_flows(links, engine, 2);
  CHECK(r.done[0] == Approx(15.0).epsilon(1e-12));
  CHECK(r.done[1] == Approx(20.0).epsilon(1e-12));
  CHECK(r.other == 2);  // flow 0's event at 10 s and flow 1's at 25 s
  CHECK(links.flow_slots() == 2);
}

TEST_CASE("a flow in its latency no longer shares the link", "[engine]") {
  // Link 10 B/s, 5 s latency. Flow 0 (100 B) is through at 10 s and arrives at 15 s. Flow 1 starts at
  // 12 s and has the bandwidth to itself: through at 22 s, arrives at 27 s. Flow slots are reused.
  Engine engine;
  FluidLinks links;
  links.add_link(10, 5);
  links.start(engine, 0, 100, 0, 0);
  engine.at(12.0, 1, 1);
  FlowRun r = run_flows(links, engine, 2);
  CHECK(r.done[0] == 15.0);
  CHECK(r.done[1] == 27.0);
  CHECK(r.other == 0);
  CHECK(links.flow_slots() == 2);  // flow 0 was still arriving when flow 1 started
  engine.at(30.0, 1, 0);
  r = run_flows(links, engine, 1);
  CHECK(r.done[0] == 45.0);
  CHECK(links.flow_slots() == 2);
}

TEST_CASE("flows on different links do not share", "[engine]") {
  Engine engine;
  FluidLinks links;
  int a = links.add_link(10);
  int b = links.add_link(20);
  links.start(engine, a, 100, 0, 0);
  links.start(engine, b, 100, 0, 1);
  FlowRun r = run_flows(links, engine, 2);
  CHECK(r.done[0] == 10.0);
  CHECK(r.done[1] == 5.0);
}

TEST_CASE("an infinite link or an empty flow takes the latency only", "[engine]") {
  Engine engine;
  FluidLinks links;
  int fast = links.add_link(std::numeric_limits<double>::infinity());
  int slow = links.add_link(1, 0.5);
  engine.at(3.0, 2, 0);
  std::vector<double> done(2, -1);
  engine.run([&](const EngineEvent& e) {
    if (e.kind == 2) {
      links.start(engine, fast, 1e12, 0, 0);
      links.start(engine, slow, 0, 0, 1);
      return;
    }
    std::uint32_t tag = 9;
    REQUIRE(links.finish(engine, e, tag));
    done[tag] = engine.now();
  });
  CHECK(done == std::vector<double>{3.0, 3.5});
  CHECK(links.active(slow) == 0);
}

TEST_CASE("a link needs a positive bandwidth and a latency >= 0", "[engine]") {
  FluidLinks links;
  try {
    links.add_link(0);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) == "link bandwidth 0 B/s: must be > 0 (give the link a positive bandwidth)");
  }
  try {
    links.add_link(1, -1);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "link latency -1 s: must be a finite number >= 0");
  }
}
