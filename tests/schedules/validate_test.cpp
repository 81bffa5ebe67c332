#include <catch2/catch.hpp>

#include <algorithm>

#include "core/error.hpp"
#include "schedules/generators.hpp"
#include "schedules/ir.hpp"
#include "schedules/validate.hpp"
#include "../text_match.hpp"

using namespace pw;

namespace {
std::string validation_error(const Schedule& s) {
  try {
    validate(s);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    // As the CLI prints it: the message, then the grid on the lines below.
    return e.details().empty() ? std::string(e.what()) : std::string(e.what()) + "\n" + e.details();
  }
  return "(valid)";
}
size_t index_of(const std::vector<Action>& list, const std::string& text) {
  const Action a = action_from_text(text);
  for (size_t k = 0; k < list.size(); ++k)
    if (list[k] == a) return k;
  FAIL("no " << text);
  return 0;
}
void erase_cell(std::vector<Action>& list, const std::string& text) {
  list.erase(list.begin() + static_cast<long>(index_of(list, text)));
}
void swap_cells(std::vector<Action>& list, const std::string& a, const std::string& b) {
  std::swap(list[index_of(list, a)], list[index_of(list, b)]);
}
// 1F1B on 2 ranks, 3 micro-batches:
//   rank 0 | 0F0  0F1  0BW0 0F2  0BW1 0BW2
//   rank 1 | 1F0  1BW0 1F1  1BW1 1F2  1BW2
Schedule small() { return make_schedule({"1f1b", 2, 3}); }
}  // namespace

TEST_CASE("compute dependencies come from the stage graph alone") {
  CHECK(compute_dependencies(action_from_text("0F0"), 3).empty());
  CHECK(compute_dependencies(action_from_text("2F1"), 3) == std::vector<Action>{action_from_text("1F1")});
  CHECK(compute_dependencies(action_from_text("2B1"), 3) == std::vector<Action>{action_from_text("2F1")});
  CHECK(compute_dependencies(action_from_text("1BW1"), 3) ==
        std::vector<Action>{action_from_text("1F1"), action_from_text("2B1")});
  CHECK(compute_dependencies(action_from_text("1W1"), 3) == std::vector<Action>{action_from_text("1B1")});
  CHECK(compute_dependencies(action_from_text("1F4&1BW0"), 3) ==
        std::vector<Action>{action_from_text("0F4"), action_from_text("1F0"), action_from_text("2B0")});
  CHECK(compute_dependencies(action_from_text("1SEND_F0"), 3) == std::vector<Action>{action_from_text("1F0")});
  CHECK(compute_dependencies(action_from_text("1SEND_B0"), 3) == std::vector<Action>{action_from_text("1B0")});
  CHECK(compute_dependencies(action_from_text("1RECV_F0"), 3).empty());
}

TEST_CASE("validate: one line of message, then the grid with the offending cell marked as its details") {
  Schedule s = small();
  swap_cells(s.ranks[0], "0F2", "0BW2");
  try {
    validate(s);
    FAIL("validate accepted an out-of-order schedule");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "schedule 1f1b: out of order at rank 0, step 3: '0BW2' comes before its dependency '0F2' (step 5)");
    CHECK(e.details() ==
          "step   | 0      1      2      3      4      5\n"
          "rank 0 | 0F0    0F1    0BW0   [0BW2] 0BW1   0F2\n"
          "rank 1 | 1F0    1BW0   1F1    1BW1   [1F2]  1BW2");
  }
}

TEST_CASE("validate: a large schedule's error shows the grid around the fault, not the whole of it") {
  Schedule s = make_schedule({"1f1b", 32, 4000});  // 8,000 steps a rank
  swap_cells(s.ranks[20], "20F2000", "20BW2000");
  try {
    validate(s);
    FAIL("validate accepted an out-of-order schedule");
  } catch (const Error& e) {
    const std::string& grid = e.details();
    CHECK(std::string(e.what()) == "schedule 1f1b: out of order at rank 20, step 3989: '20BW2000' comes before its "
                                   "dependency '20F2000' (step 4012)");
    CHECK_THAT(grid, Catch::StartsWith("(ranks 12-27 of 32, steps 3977-4000 of 8000)\n"));
    CHECK_THAT(grid, Catch::Contains("[20BW2000]"));
    CHECK(std::count(grid.begin(), grid.end(), '\n') == 1 + 1 + 16 - 1);  // note, header, 16 ranks (no last newline)
    CHECK(grid.size() < 6000);  // the whole grid: 32 ranks x 8,000 cells, megabytes
  }
}

TEST_CASE("validate: broken schedules, first line of each message") {
  SECTION("a dropped action") {
    Schedule s = small();
    erase_cell(s.ranks[1], "1F2");
    CHECK(first_line(validation_error(s)) == "schedule 1f1b: missing action: stage 1 (rank 1) has no F for micro-batch 2");
  }
  SECTION("a dropped W after its B") {
    Schedule s = make_schedule({"zb-h1", 2, 2});
    erase_cell(s.ranks[0], "0W1");
    CHECK(first_line(validation_error(s)) == "schedule zb-h1: missing action: stage 0 (rank 0) has B but no W for micro-batch 1");
  }
  SECTION("a stage on the wrong rank") {
    Schedule s = small();
    erase_cell(s.ranks[1], "1F0");
    s.ranks[0].insert(s.ranks[0].begin() + 1, action_from_text("1F0"));
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: wrong rank at rank 0, step 1: '1F0' (the placement puts stage 1 on rank 1)");
  }
  SECTION("a placement that disagrees with the lists") {
    Schedule s = small();
    s.placement.kind = PlacementKind::Explicit;
    s.placement.stage_rank = {1, 0};
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: wrong rank at rank 0, step 0: '0F0' (the placement puts stage 0 on rank 1)");
  }
  SECTION("a duplicated micro-batch") {
    Schedule s = small();
    s.ranks[1][index_of(s.ranks[1], "1F2")] = action_from_text("1F1");
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: duplicate at rank 1, step 4: '1F1' (second F of micro-batch 1 on stage 1; the first is at "
          "rank 1, step 2)");
  }
  SECTION("a backward done twice, once split and once whole") {
    Schedule s = make_schedule({"zb-h1", 2, 2});
    s.ranks[1][index_of(s.ranks[1], "1W0")] = action_from_text("1BW0");
    CHECK(first_line(validation_error(s)) ==
          "schedule zb-h1: duplicate at rank 1, step 4: '1BW0' (second backward of micro-batch 0 on stage 1; the first "
          "is at rank 1, step 1)");
  }
  SECTION("stage and micro-batch out of range") {
    Schedule s = small();
    s.ranks[1][0] = action_from_text("5F0");
    CHECK(first_line(validation_error(s)) == "schedule 1f1b: stage out of range at rank 1, step 0: '5F0' (stages 0..1)");
    s.ranks[1][0] = action_from_text("1F3");
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: micro-batch out of range at rank 1, step 0: '1F3' (micro-batches 0..2)");
  }
  SECTION("a cycle across ranks") {
    Schedule s = small();
    swap_cells(s.ranks[1], "1F0", "1F1");  // rank 1 wants 0F1 first, rank 0 wants 1BW0 before 0F2
    swap_cells(s.ranks[0], "0F1", "0BW0");
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: out of order at rank 0, step 1: '0BW0' waits for '1BW0' on rank 1 (step 1), which is blocked "
          "at step 0: '1F1'");
  }
  SECTION("one half of a composite needs the other") {
    Schedule s;
    s.name = "fb";
    s.microbatches = 1;
    s.placement = Placement::loop(1, 1);
    s.ranks = {{action_from_text("0F0&0BW0")}};
    CHECK(first_line(validation_error(s)) ==
          "schedule fb: out of order at rank 0, step 0: '0F0&0BW0' (one half of the composite needs the other)");
  }
  SECTION("communication in a schedule not marked lowered") {
    Schedule s = lower(small());
    s.lowered = false;
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: communication in a compute-only schedule at rank 0, step 1: '0SEND_F0' (lowered is false; "
          "lower() adds sends and receives)");
  }
}

TEST_CASE("validate: broken communication, first line of each message") {
  SECTION("a removed receive") {
    Schedule s = lower(small());
    erase_cell(s.ranks[1], "1RECV_F0");
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: unmatched send at rank 0, step 1: '0SEND_F0' (no '1RECV_F0' on rank 1)");
  }
  SECTION("a removed send") {
    Schedule s = lower(small());
    erase_cell(s.ranks[1], "1SEND_B2");
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: unmatched receive at rank 0, step 10: '0RECV_B2' (no '1SEND_B2' on rank 1)");
  }
  SECTION("a tensor with neither send nor receive") {
    Schedule s = lower(small());
    erase_cell(s.ranks[1], "1SEND_B1");
    erase_cell(s.ranks[0], "0RECV_B1");
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: missing communication at rank 1, step 6: '1BW1' (its output goes to stage 0 on rank 0, but no "
          "'1SEND_B1' and '0RECV_B1' carry it)");
  }
  SECTION("communication between stages on one rank") {
    Schedule s = lower(make_schedule({"interleaved", 1, 2, 2}));
    s.ranks[0].insert(s.ranks[0].begin() + 1, action_from_text("0SEND_F0"));
    CHECK(first_line(validation_error(s)) ==
          "schedule interleaved: needless communication at rank 0, step 1: '0SEND_F0' (stages 0 and 1 are both on rank 0)");
  }
  SECTION("a receive from a stage that does not exist") {
    Schedule s = lower(small());
    s.ranks[0].insert(s.ranks[0].begin(), action_from_text("0RECV_F0"));
    CHECK(first_line(validation_error(s)) == "schedule 1f1b: no peer stage at rank 0, step 0: '0RECV_F0' (stage 0 is the first stage)");
  }
  SECTION("a compute action before its receive") {
    Schedule s = lower(small());
    swap_cells(s.ranks[1], "1RECV_F1", "1RECV_F2");
    CHECK(first_line(validation_error(s)) ==
          "schedule 1f1b: out of order at rank 1, step 5: '1F1' comes before its dependency '1RECV_F1' (step 8)");
  }
  SECTION("two receives swapped into a deadlock") {
    // Rank 0 posts its gradient receives early (valid: each one's send needs nothing rank 0 still owes):
    //   rank 0 | 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0BW0 0RECV_B1 0F2 0SEND_F2 0RECV_B2 0BW1 0BW2
    Schedule s = lower(small());
    auto& r0 = s.ranks[0];
    erase_cell(r0, "0RECV_B1");
    r0.insert(r0.begin() + static_cast<long>(index_of(r0, "0F2")), action_from_text("0RECV_B1"));
    erase_cell(r0, "0RECV_B2");
    r0.insert(r0.begin() + static_cast<long>(index_of(r0, "0BW1")), action_from_text("0RECV_B2"));
    CHECK(validation_error(s) == "(valid)");
    CHECK(strip_comm(s).ranks == small().ranks);
    // Swapped, rank 0 waits for micro-batch 2's gradient before it has sent micro-batch 2's input.
    swap_cells(r0, "0RECV_B1", "0RECV_B2");
    const std::string message = validation_error(s);
    CHECK(first_line(message) ==
          "schedule 1f1b: deadlock at rank 0, step 6: '0RECV_B2' waits for '1SEND_B2' on rank 1 (step 11), which is "
          "blocked at step 8: '1RECV_F2'");
    CHECK(message.find("[0RECV_B2]") != std::string::npos);
    CHECK(message.find("[1RECV_F2]") != std::string::npos);
  }
}

TEST_CASE("validate: with two copies of the model, a micro-batch runs on its copy's stages only") {
  // DualPipe on 2 ranks, 4 micro-batches: copy 0 is stages 0 and 1 (micro-batches 0 and 2), copy 1 stages 2 and 3
  // (1 and 3), stage 3 on rank 0.
  Schedule s = make_schedule({"dualpipe", 2, 4});
  CHECK(validation_error(s) == "(valid)");
  CHECK(compute_dependencies(action_from_text("2F1"), 2).empty());  // copy 1's first stage
  CHECK(compute_dependencies(action_from_text("1BW0"), 2) == std::vector<Action>{action_from_text("1F0")});  // copy 0's last
  s.ranks[0][0] = action_from_text("0F1");
  CHECK(first_line(validation_error(s)) ==
        "schedule dualpipe: wrong copy at rank 0, step 0: '0F1' (stage 0 is in copy 0 of the model, micro-batch 1 runs "
        "on copy 1)");
  // Nothing crosses from one copy to the other: stage 1 is copy 0's last.
  Schedule l = lower(make_schedule({"dualpipe", 2, 4}));
  l.ranks[1].push_back(action_from_text("1SEND_F0"));
  CHECK(first_line(validation_error(l)) ==
        "schedule dualpipe: no peer stage at rank 1, step " + std::to_string(l.ranks[1].size() - 1) +
            ": '1SEND_F0' (stage 1 is the last stage of copy 0)");
  s = make_schedule({"dualpipe", 2, 4});
  s.copies = 3;
  CHECK(first_line(validation_error(s)) ==
        "schedule dualpipe: 3 copies of the model do not split its 4 stages into pipelines of equal length");
  s = make_schedule({"dualpipe", 2, 4});
  s.microbatches = 5;
  CHECK(first_line(validation_error(s)) == "schedule dualpipe: 5 micro-batches do not split evenly over 2 copies of the model");
}

TEST_CASE("validate: structural problems") {
  Schedule s = small();
  s.ranks.pop_back();
  CHECK(first_line(validation_error(s)) == "schedule 1f1b: the placement has 2 ranks but the schedule lists 1");
  s = small();
  s.microbatches = 0;
  CHECK(first_line(validation_error(s)) == "schedule 1f1b: microbatches is 0; a schedule needs at least 1");
  s = small();
  s.placement.stage_rank = {0, 2};
  CHECK(first_line(validation_error(s)) == "schedule 1f1b: the placement puts stage 1 on rank 2, but there are 2 ranks");
}
