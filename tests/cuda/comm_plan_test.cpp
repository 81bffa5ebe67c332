// The NCCL transport's channels and receive order, derived from the schedule IR, for every schedule family.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "../error_text.hpp"
#include "executor/cuda/host/comm_plan.hpp"
#include "schedules/generators.hpp"

using namespace pw;

namespace {

Schedule lowered(const std::string& name, int ranks, int microbatches, int chunks = 1) {
  ScheduleSpec spec;
  spec.name = name;
  spec.ranks = ranks;
  spec.microbatches = microbatches;
  spec.chunks = chunks;
  return lower(make_schedule(spec));
}

// Runs the plan as the transport does: sends never block; a receive posts through its message in the
// sender's order and then needs every posted message of the channel up to it to have been sent (a channel
// delivers in order). Returns whether every rank finished, and counts receives that had to post earlier
// messages first.
bool runs_to_completion(const Schedule& s, const CommPlan& plan, int& posted_ahead) {
  const int ranks = s.num_ranks();
  std::vector<size_t> pc(static_cast<size_t>(ranks), 0);
  std::vector<int> sent(plan.channels().size(), 0);  // messages issued per channel
  std::vector<ReceiveCursor> cursors;
  for (const Channel& c : plan.channels()) cursors.emplace_back(static_cast<int>(c.messages.size()));
  posted_ahead = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      const auto& list = s.ranks[static_cast<size_t>(r)];
      while (pc[static_cast<size_t>(r)] < list.size()) {
        const Action& a = list[pc[static_cast<size_t>(r)]];
        if (a.op == Op::SendF || a.op == Op::SendB) {
          const int dst = s.placement.rank_of(a.op == Op::SendF ? a.stage + 1 : a.stage - 1);
          const int ch = plan.channel_of(r, dst);
          REQUIRE(plan.position(ch, MessageKey{0, a.op, a.stage, a.microbatch}) == sent[static_cast<size_t>(ch)]);
          ++sent[static_cast<size_t>(ch)];
        } else if (a.op == Op::RecvF || a.op == Op::RecvB) {
          const int src = s.placement.rank_of(a.op == Op::RecvF ? a.stage - 1 : a.stage + 1);
          const int ch = plan.channel_of(src, r);
          const Op send_op = a.op == Op::RecvF ? Op::SendF : Op::SendB;
          const int from_stage = a.op == Op::RecvF ? a.stage - 1 : a.stage + 1;
          const int pos = plan.position(ch, MessageKey{0, send_op, from_stage, a.microbatch});
          ReceiveCursor probe = cursors[static_cast<size_t>(ch)];
          const ReceiveCursor::Range range = probe.post_through(0, pos);
          if (pos >= sent[static_cast<size_t>(ch)]) break;  // not sent yet: this rank waits
          cursors[static_cast<size_t>(ch)] = probe;
          if (!range.empty() && range.last > range.first) ++posted_ahead;
        }
        ++pc[static_cast<size_t>(r)];
        progress = true;
      }
    }
  }
  for (int r = 0; r < ranks; ++r)
    if (pc[static_cast<size_t>(r)] != s.ranks[static_cast<size_t>(r)].size()) return false;
  return true;
}

}  // namespace

TEST_CASE("1F1B on 4 ranks: one channel per direction between neighbours, in the sender's order", "[cuda][host]") {
  const Schedule s = lowered("1f1b", 4, 8);
  const CommPlan plan(s);
  // Forward 0->1, 1->2, 2->3 and backward 1->0, 2->1, 3->2, ordered by (src, dst).
  REQUIRE(plan.channels().size() == 6);
  const std::vector<std::pair<int, int>> pairs{{0, 1}, {1, 0}, {1, 2}, {2, 1}, {2, 3}, {3, 2}};
  for (size_t c = 0; c < pairs.size(); ++c) {
    CHECK(plan.channels()[c].src == pairs[c].first);
    CHECK(plan.channels()[c].dst == pairs[c].second);
    CHECK(plan.channels()[c].messages.size() == 8);  // one tensor per micro-batch each way
  }
  CHECK(plan.channel_of(0, 2) == -1);
  CHECK(plan.channels_of(0) == std::vector<int>{0, 1});
  CHECK(plan.channels_of(1) == std::vector<int>{0, 1, 2, 3});
  // 1F1B sends micro-batches in order both ways.
  for (int mb = 0; mb < 8; ++mb) {
    CHECK(plan.position(0, MessageKey{0, Op::SendF, 0, mb}) == mb);
    CHECK(plan.position(1, MessageKey{5, Op::SendB, 1, mb}) == mb);  // the iteration does not matter
  }
  CHECK(bad_input([&] { plan.position(0, MessageKey{0, Op::SendF, 1, 0}); }) ==
        "runtime error: channel rank 0 -> rank 1 carries no SEND_F of stage 1 micro-batch 0");
}

TEST_CASE("every schedule family runs to completion on the channels", "[cuda][host]") {
  struct Case {
    std::string name;
    int ranks, microbatches, chunks;
  };
  const std::vector<Case> cases{{"gpipe", 4, 8, 1},       {"1f1b", 4, 8, 1},  {"interleaved", 4, 8, 2},
                                {"bfs", 4, 8, 2},         {"zb-h1", 4, 8, 1}, {"zb-h2", 4, 8, 1},
                                {"zb-v", 4, 8, 2},        {"v-half", 4, 8, 2}, {"v-min", 4, 8, 2},
                                {"dualpipev", 4, 8, 2}};
  for (const Case& c : cases) {
    INFO(c.name);
    const Schedule s = lowered(c.name, c.ranks, c.microbatches, c.chunks);
    const CommPlan plan(s);
    int ahead = 0;
    CHECK(runs_to_completion(s, plan, ahead));
    // Every message a rank receives is on the channel from its sender, and each channel holds each message once.
    long messages = 0;
    for (const Channel& ch : plan.channels()) {
      std::set<std::tuple<Op, int, int>> unique;
      for (const MessageKey& k : ch.messages) unique.insert({k.op, k.stage, k.microbatch});
      CHECK(unique.size() == ch.messages.size());
      messages += static_cast<long>(ch.messages.size());
    }
    long sends = 0;
    for (const auto& list : s.ranks)
      for (const Action& a : list) sends += (a.op == Op::SendF || a.op == Op::SendB) ? 1 : 0;
    CHECK(messages == sends);
  }
}

TEST_CASE("a receive wanted before earlier messages of its channel posts them first", "[cuda][host]") {
  ReceiveCursor cursor(4);  // 4 messages per iteration
  ReceiveCursor::Range r = cursor.post_through(0, 2);
  CHECK(r.first == 0);
  CHECK(r.last == 2);
  CHECK(cursor.posted() == 3);
  r = cursor.post_through(0, 1);  // already posted with the first
  CHECK(r.empty());
  r = cursor.post_through(0, 3);
  CHECK(r.first == 3);
  CHECK(r.last == 3);
  r = cursor.post_through(1, 0);  // the next iteration continues the channel's sequence
  CHECK(r.first == 4);
  CHECK(r.last == 4);
  CHECK(cursor.posted() == 5);
}

TEST_CASE("the plan needs a lowered schedule", "[cuda][host]") {
  ScheduleSpec spec;
  spec.name = "1f1b";
  spec.ranks = 2;
  spec.microbatches = 2;
  CHECK(bad_input([&] { CommPlan plan(make_schedule(spec)); }) ==
        "schedule 1f1b: the NCCL transport needs a lowered schedule (lower() it first)");
}
