#include <catch2/catch.hpp>

#include "schedules/generators.hpp"
#include "schedules/ir.hpp"
#include "schedules/validate.hpp"

using namespace pw;

namespace {
std::vector<std::vector<Action>> parse_rows(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::vector<Action>> out;
  for (const auto& row : rows) {
    out.emplace_back();
    for (const auto& text : row) out.back().push_back(action_from_text(text));
  }
  return out;
}
Schedule hand(const std::string& name, int m, Placement placement, const std::vector<std::vector<std::string>>& rows) {
  Schedule s;
  s.name = name;
  s.microbatches = m;
  s.placement = std::move(placement);
  s.ranks = parse_rows(rows);
  return s;
}
}  // namespace

TEST_CASE("lower: send right after the producer, receive right before the consumer") {
  const Schedule s = lower(make_schedule({"1f1b", 2, 2}));
  CHECK(s.lowered);
  CHECK(s.ranks == parse_rows({
                       {"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0BW0", "0RECV_B1", "0BW1"},
                       {"1RECV_F0", "1F0", "1BW0", "1SEND_B0", "1RECV_F1", "1F1", "1BW1", "1SEND_B1"},
                   }));
  validate(s);
}

TEST_CASE("lower: a middle rank receives and sends both ways, B and W split sends after B only") {
  const Schedule s = lower(make_schedule({"zb-h1", 3, 1}));
  CHECK(s.ranks == parse_rows({
                       {"0F0", "0SEND_F0", "0RECV_B0", "0B0", "0W0"},
                       {"1RECV_F0", "1F0", "1SEND_F0", "1RECV_B0", "1B0", "1SEND_B0", "1W0"},
                       {"2RECV_F0", "2F0", "2B0", "2SEND_B0", "2W0"},
                   }));
  validate(s);
}

TEST_CASE("lower: stages on the same rank hand over locally (V placement, interleaved on one rank)") {
  const Schedule v = hand("v", 1, Placement::v(2), {{"0F0", "3F0", "3BW0", "0BW0"}, {"1F0", "2F0", "2BW0", "1BW0"}});
  validate(v);
  const Schedule lv = lower(v);
  CHECK(lv.ranks == parse_rows({
                        {"0F0", "0SEND_F0", "3RECV_F0", "3F0", "3BW0", "3SEND_B0", "0RECV_B0", "0BW0"},
                        {"1RECV_F0", "1F0", "2F0", "2SEND_F0", "2RECV_B0", "2BW0", "1BW0", "1SEND_B0"},
                    }));
  validate(lv);
  const Schedule one = make_schedule({"interleaved", 1, 2, 2});
  CHECK(lower(one).ranks == one.ranks);
}

TEST_CASE("lower: a composite F&BW receives both inputs before it and sends both outputs after it") {
  const Schedule s = hand("fb", 2, Placement::loop(3, 1),
                          {{"0F0", "0F1", "0BW0", "0BW1"}, {"1F0", "1F1&1BW0", "1BW1"}, {"2F0", "2BW0", "2F1", "2BW1"}});
  validate(s);
  const Schedule l = lower(s);
  CHECK(l.ranks[1] == parse_rows({{"1RECV_F0", "1F0", "1SEND_F0", "1RECV_F1", "1RECV_B0", "1F1&1BW0", "1SEND_F1",
                                   "1SEND_B0", "1RECV_B1", "1BW1", "1SEND_B1"}})[0]);
  validate(l);
  CHECK(strip_comm(l).ranks == s.ranks);
}

TEST_CASE("lower never reorders compute, and lowering twice changes nothing") {
  for (const std::string& name : schedule_names()) {
    for (int p = 1; p <= 5; ++p) {
      for (int m = p; m <= 2 * p + 1; ++m) {
        if (name.starts_with("interleaved") && m % p != 0) continue;
        if (name == "dualpipev" && m < 2 * p) continue;
        if (name == "dualpipe" && (p % 2 != 0 || m % 2 != 0 || m < 2 * p)) continue;
        const Schedule s = make_schedule({name, p, m, chunks_per_rank(name, 2)});
        const Schedule l = lower(s);
        const Schedule back = strip_comm(l);
        INFO(name << " p" << p << " m" << m);
        CHECK_FALSE(back.lowered);
        CHECK(back.ranks == s.ranks);
        CHECK(lower(l).ranks == l.ranks);
      }
    }
  }
}
