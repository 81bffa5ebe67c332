#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "schedules/generators.hpp"
#include "schedules/inflight.hpp"
#include "schedules/ir.hpp"

using namespace pw;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("ops are compute or communication and print as PyTorch's action letters") {
  for (Op op : {Op::F, Op::B, Op::W, Op::BW, Op::FB}) {
    CHECK(is_compute(op));
    CHECK_FALSE(is_comm(op));
  }
  for (Op op : {Op::SendF, Op::RecvF, Op::SendB, Op::RecvB}) {
    CHECK(is_comm(op));
    CHECK_FALSE(is_compute(op));
  }
  CHECK(std::string(to_string(Op::BW)) == "BW");
  CHECK(std::string(to_string(Op::FB)) == "FB");
  CHECK(std::string(to_string(Op::RecvB)) == "RECV_B");
}

TEST_CASE("action text round-trips for every op") {
  const std::vector<std::pair<std::string, Action>> cases = {
      {"2F0", {Op::F, 2, 0}},          {"0B3", {Op::B, 0, 3}},          {"1W3", {Op::W, 1, 3}},
      {"1BW3", {Op::BW, 1, 3}},        {"3SEND_F1", {Op::SendF, 3, 1}}, {"0RECV_B2", {Op::RecvB, 0, 2}},
      {"4RECV_F12", {Op::RecvF, 4, 12}}, {"11SEND_B7", {Op::SendB, 11, 7}},
      {"1F4&1BW0", {Op::FB, 1, 4, 1, 0}},
  };
  for (const auto& [text, action] : cases) {
    CHECK(to_text(action) == text);
    CHECK(action_from_text(text) == action);
  }
}

TEST_CASE("malformed action text names the text and the expected form") {
  const std::string expected = ": expected <stage><op><micro-batch> such as 2F0, 0B3, 1W3, 1BW3, 3SEND_F1";
  for (const std::string bad : {"xyz", "", "F0", "2F", "2X0", "2f0", "-1F0", "2F0 ", "2SEND0", "1FB3", "1234567890F0"})
    CHECK(error_of([&] { action_from_text(bad); }) == "action '" + bad + "'" + expected);
  CHECK(error_of([] { action_from_text("1B4&1BW0"); }) ==
        "action '1B4&1BW0': a composite is <F action>&<BW action> such as 1F4&1BW0");
  CHECK(error_of([] { action_from_text("1F4&"); }) ==
        "action '1F4&': a composite is <F action>&<BW action> such as 1F4&1BW0");
}

TEST_CASE("placements: loop puts stage s on rank s mod p, V folds the stages back") {
  const Placement loop = Placement::loop(4, 2);
  CHECK(loop.kind == PlacementKind::Loop);
  CHECK(loop.stage_rank == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(loop.stages() == 8);
  CHECK(loop.rank_of(5) == 1);
  const Placement v = Placement::v(3);
  CHECK(v.kind == PlacementKind::V);
  CHECK(v.stage_rank == std::vector<int>{0, 1, 2, 2, 1, 0});
  CHECK(v.ranks == 3);
  CHECK(std::string(to_string(PlacementKind::Explicit)) == "explicit");
}

TEST_CASE("grid: step header, one padded row per rank, marked cells in brackets") {
  const Schedule s = make_schedule({"1f1b", 2, 3});
  CHECK(to_grid(s) ==
        "step   | 0    1    2    3    4    5\n"
        "rank 0 | 0F0  0F1  0BW0 0F2  0BW1 0BW2\n"
        "rank 1 | 1F0  1BW0 1F1  1BW1 1F2  1BW2\n");
  CHECK(to_grid(s, {{1, 1}}) ==
        "step   | 0      1      2      3      4      5\n"
        "rank 0 | 0F0    0F1    0BW0   0F2    0BW1   0BW2\n"
        "rank 1 | 1F0    [1BW0] 1F1    1BW1   1F2    1BW2\n");
}

TEST_CASE("grid around marked cells: at most so many ranks and steps, with what it leaves out said first") {
  const Schedule s = make_schedule({"1f1b", 4, 8});  // 16 steps a rank
  // Everything fits: the whole grid, no note.
  CHECK(to_grid_around(s, {{1, 1}}, 4, 16) == to_grid(s, {{1, 1}}));
  // Ranks 2-3 and steps 8-11 around the cell at rank 3, step 10: the cells of the whole grid's rows.
  CHECK(to_grid_around(s, {{3, 10}}, 2, 4) ==
        "(ranks 2-3 of 4, steps 8-11 of 16)\n"
        "step   | 8     9     10    11\n"
        "rank 2 | 2BW3  2F5   2BW4  2F6\n"
        "rank 3 | 3F4   3BW4  [3F5] 3BW5\n");
  CHECK_THAT(to_grid(s), Catch::Contains("rank 2 | 2F0  2F1  2BW0 2F2  2BW1 2F3  2BW2 2F4  2BW3 2F5  2BW4 2F6 "));
  CHECK_THAT(to_grid(s), Catch::Contains("rank 3 | 3F0  3BW0 3F1  3BW1 3F2  3BW2 3F3  3BW3 3F4  3BW4 3F5  3BW5 "));
  // Centred on the first mark, clipped to the grid's ends; the other marks only where they fall inside.
  CHECK_THAT(to_grid_around(s, {{0, 0}, {0, 15}}, 1, 3), Catch::StartsWith("(ranks 0-0 of 4, steps 0-2 of 16)\n"));
  CHECK_THAT(to_grid_around(s, {{3, 15}}, 1, 3), Catch::StartsWith("(ranks 3-3 of 4, steps 13-15 of 16)\n"));
}

TEST_CASE("schedule JSON round-trips, lowered or not") {
  for (const Schedule& s : {make_schedule({"zb-h1", 3, 4}), lower(make_schedule({"interleaved", 2, 4, 2})),
                            lower(make_schedule({"dualpipe", 4, 8}))}) {
    const std::string text = schedule_to_json_text(s);
    const Schedule back = schedule_from_json_text(text, "s.json");
    CHECK(back.name == s.name);
    CHECK(back.microbatches == s.microbatches);
    CHECK(back.placement.kind == s.placement.kind);
    CHECK(back.placement.stage_rank == s.placement.stage_rank);
    CHECK(back.placement.ranks == s.placement.ranks);
    CHECK(back.ranks == s.ranks);
    CHECK(back.lowered == s.lowered);
    CHECK(back.copies == s.copies);
    // One copy of the model is the default: the field appears only where there are more.
    CHECK((text.find("\"copies\": 2") != std::string::npos) == (s.copies == 2));
    CHECK(schedule_to_json_text(back) == text);
  }
  Schedule v;
  v.name = "hand";
  v.microbatches = 1;
  v.placement = Placement::v(1);
  v.ranks = {{Action{Op::F, 0, 0}, Action{Op::F, 1, 0}, Action{Op::BW, 1, 0}, Action{Op::BW, 0, 0}}};
  CHECK(schedule_from_json_text(schedule_to_json_text(v), "v.json").placement.kind == PlacementKind::V);
}

TEST_CASE("schedule JSON: the versioned object's fields") {
  const Schedule s = make_schedule({"gpipe", 2, 1});
  CHECK(schedule_to_json_text(s) ==
        "{\n"
        "  \"format\": \"pipewright-schedule\",\n"
        "  \"version\": 1,\n"
        "  \"name\": \"gpipe\",\n"
        "  \"microbatches\": 1,\n"
        "  \"placement\": {\n"
        "    \"kind\": \"loop\",\n"
        "    \"stage_rank\": [\n"
        "      0,\n"
        "      1\n"
        "    ],\n"
        "    \"ranks\": 2\n"
        "  },\n"
        "  \"ranks\": [\n"
        "    [\n"
        "      \"0F0\",\n"
        "      \"0BW0\"\n"
        "    ],\n"
        "    [\n"
        "      \"1F0\",\n"
        "      \"1BW0\"\n"
        "    ]\n"
        "  ],\n"
        "  \"lowered\": false\n"
        "}\n");
}

TEST_CASE("schedule JSON errors name the file and the field") {
  const std::string head = R"({"format": "pipewright-schedule", "version": 1, "name": "x", "microbatches": 1,)";
  const std::string loop2 = R"("placement": {"kind": "loop", "stage_rank": [0, 1], "ranks": 2},)";
  CHECK(error_of([] { schedule_from_json_text("{\"format\": ", "s.json"); })
            .rfind("s.json: malformed JSON at byte 12: ", 0) == 0);
  CHECK(error_of([] { schedule_from_json_text(R"({"format": "other"})", "s.json"); }) ==
        "s.json: format must be \"pipewright-schedule\", got \"other\"");
  CHECK(error_of([] { schedule_from_json_text(R"({"format": "pipewright-schedule", "version": 2})", "s.json"); }) ==
        "s.json: version is 2; this pipewright reads version 1");
  CHECK(error_of([&] { schedule_from_json_text(head + loop2 + R"("ranks": [["0F0"], ["1F0", "1Q0"]]})", "s.json"); }) ==
        "s.json: ranks[1][1]: action '1Q0': expected <stage><op><micro-batch> such as 2F0, 0B3, 1W3, 1BW3, 3SEND_F1");
  CHECK(error_of([&] { schedule_from_json_text(head + loop2 + R"("ranks": [["0F0"]]})", "s.json"); }) ==
        "s.json: ranks must be a list of 2 per-rank lists of actions (placement.ranks)");
  const auto placed = [&](const std::string& placement, const std::string& ranks) {
    return error_of([&] { schedule_from_json_text(head + R"("placement": )" + placement + R"(, "ranks": )" + ranks + "}", "s.json"); });
  };
  CHECK(error_of([&] { schedule_from_json_text(head + loop2 + R"("ranks": [[], []], "copies": 3})", "s.json"); }) ==
        "s.json: copies is 3, which does not divide the placement's 2 stages into pipelines of equal length; give a "
        "divisor of 2 (1: one copy of the model)");
  CHECK(error_of([&] { schedule_from_json_text(head + loop2 + R"("ranks": [[], []], "copies": 0})", "s.json"); })
            .rfind("s.json: copies ", 0) == 0);
  CHECK(placed(R"({"kind": "loop", "stage_rank": [1, 0], "ranks": 2})", "[[], []]") ==
        "s.json: placement.stage_rank does not put stage s on rank s mod ranks as kind 'loop' says; use kind 'explicit'");
  CHECK(placed(R"({"kind": "ring", "stage_rank": [0], "ranks": 1})", "[[]]") ==
        "s.json: placement.kind must be \"loop\", \"v\" or \"explicit\", got \"ring\"");
  CHECK(placed(R"({"kind": "explicit", "stage_rank": [0, 2], "ranks": 2})", "[[], []]") ==
        "s.json: placement.stage_rank names rank 2, but there are 2 ranks (0..1)");
  // Counts are capped before anything is sized by them; a rank beyond an int is named whole.
  CHECK(error_of([&] {
          schedule_from_json_text(R"({"format": "pipewright-schedule", "version": 1, "name": "x", "microbatches": 1e9,
                                      "placement": {"kind": "loop", "stage_rank": [0], "ranks": 1}, "ranks": [[]]})",
                                  "s.json");
        }) == "s.json: microbatches is 1000000000 micro-batches, above the cap of 1000000; give at most 1000000");
  CHECK(placed(R"({"kind": "explicit", "stage_rank": [5000000000], "ranks": 1})", "[[]]") ==
        "s.json: placement.stage_rank names rank 5000000000, but there are 1 ranks (0..0)");
  CHECK(placed(R"({"kind": "loop", "stage_rank": [0], "ranks": 1})", R"([[")" + std::string(100'000, '0') + R"("]])") ==
        "s.json: ranks[0][0] must be an action such as \"0F0\", got \"000000000000000000000000000000000000000... "
        "(100002 bytes)");
}

TEST_CASE("peak in-flight micro-batches count F to last backward part, composites included") {
  Schedule s;
  s.name = "hand";
  s.microbatches = 3;
  s.placement = Placement::loop(1, 1);
  // F0 F1 hold 2; the composite starts F2 before finishing BW0: 3 live at once.
  s.ranks = {{action_from_text("0F0"), action_from_text("0F1"), action_from_text("0F2&0BW0"), action_from_text("0B1"),
              action_from_text("0BW2"), action_from_text("0W1")}};
  CHECK(peak_in_flight(s) == std::vector<int>{3});
  CHECK(peak_in_flight(s, HeldUntil::InputGrad) == std::vector<int>{3});
  s.ranks = {{action_from_text("0F0"), action_from_text("0B0"), action_from_text("0F1"), action_from_text("0B1"),
              action_from_text("0F2"), action_from_text("0B2"), action_from_text("0W0"), action_from_text("0W1"),
              action_from_text("0W2")}};
  CHECK(peak_in_flight(s) == std::vector<int>{3});
  CHECK(peak_in_flight(s, HeldUntil::InputGrad) == std::vector<int>{1});
}
