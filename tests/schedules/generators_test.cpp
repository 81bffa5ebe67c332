#include <catch2/catch.hpp>

#include <algorithm>

#include "core/error.hpp"
#include "schedules/generators.hpp"
#include "schedules/inflight.hpp"
#include "schedules/validate.hpp"

using namespace pw;

namespace {
std::string error_of(const ScheduleSpec& spec) {
  try {
    make_schedule(spec);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "(no error)";
}
std::vector<std::string> texts(const std::vector<Action>& list) {
  std::vector<std::string> out;
  for (const Action& a : list) out.push_back(to_text(a));
  return out;
}
ScheduleSpec interleaved(int p, int m, int v, int n = 0) {
  ScheduleSpec spec{"interleaved", p, m, v};
  spec.group_size = n;
  return spec;
}
}  // namespace

TEST_CASE("schedule names are sorted and unknown names list them") {
  CHECK(schedule_names() == std::vector<std::string>{"1f1b", "gpipe", "interleaved", "zb-h1"});
  CHECK(error_of({"x", 4, 8}) == "--schedule: unknown schedule 'x'; known: 1f1b, gpipe, interleaved, zb-h1");
  CHECK(chunks_per_rank("interleaved", 3) == 3);
  CHECK(chunks_per_rank("1f1b", 3) == 1);
  CHECK(chunks_per_rank("zb-h1", 2) == 1);
  CHECK(chunks_per_rank("gpipe", 1) == 1);
}

TEST_CASE("spec errors name the flag and the fix") {
  CHECK(error_of({"1f1b", 0, 8}) == "--pp: needs at least 1 pipeline rank, got 0");
  CHECK(error_of({"gpipe", 4, 0}) == "--microbatches: needs at least 1 micro-batch, got 0");
  CHECK(error_of({"1f1b", 4, 8, 2}) == "--vpp: 1f1b runs one chunk per rank, got 2; use --schedule interleaved for --vpp 2");
  CHECK(error_of(interleaved(4, 8, 1)) ==
        "--vpp: interleaved needs at least 2 chunks per rank; use --vpp 2 or more, or --schedule 1f1b");
  CHECK(error_of(interleaved(4, 3, 2)) ==
        "--microbatches: interleaved needs at least as many micro-batches as --pp (4), got 3; use 4 or more");
  CHECK(error_of(interleaved(4, 10, 2)) ==
        "--microbatches: interleaved with micro-batch group size 4 needs a multiple of 4, got 10; use 8 or 12");
  CHECK(error_of(interleaved(4, 13, 2, 6)) ==
        "--microbatches: interleaved with micro-batch group size 6 needs a multiple of 6 or a remainder of at least "
        "--pp (4), got 13; use 12 or 16");
  CHECK(error_of(interleaved(4, 8, 2, 3)) ==
        "--group-size: interleaved needs a group size from --pp to --microbatches (4..8), got 3");
  ScheduleSpec grouped{"1f1b", 4, 8};
  grouped.group_size = 4;
  CHECK(error_of(grouped) == "--group-size: only interleaved groups micro-batches; omit it for --schedule 1f1b");
  ScheduleSpec pending{"zb-h1", 4, 8};
  pending.max_pending = 8;
  CHECK(error_of(pending) == "--max-pending: zb-h1 keeps at most --pp (4) backward passes pending; omit it or use 4");
  pending.max_pending = 4;
  CHECK_NOTHROW(make_schedule(pending));
  pending.name = "gpipe";
  CHECK(error_of(pending) == "--max-pending: only zb-h1 limits pending backward passes; omit it for --schedule gpipe");
}

TEST_CASE("generators emit compute-only IR with loop placement") {
  const Schedule s = make_schedule(interleaved(2, 4, 3));
  CHECK(s.name == "interleaved");
  CHECK(s.microbatches == 4);
  CHECK_FALSE(s.lowered);
  CHECK(s.placement.kind == PlacementKind::Loop);
  CHECK(s.placement.stage_rank == std::vector<int>{0, 1, 0, 1, 0, 1});
  CHECK(make_schedule({"gpipe", 3, 2}).placement.stage_rank == std::vector<int>{0, 1, 2});
}

TEST_CASE("gpipe: all forwards, then all backwards") {
  const Schedule s = make_schedule({"gpipe", 2, 3});
  CHECK(texts(s.ranks[1]) == std::vector<std::string>{"1F0", "1F1", "1F2", "1BW0", "1BW1", "1BW2"});
}

TEST_CASE("1f1b with fewer micro-batches than ranks warms up with all of them") {
  const Schedule s = make_schedule({"1f1b", 4, 2});
  CHECK(texts(s.ranks[0]) == std::vector<std::string>{"0F0", "0F1", "0BW0", "0BW1"});
  CHECK(texts(s.ranks[2]) == std::vector<std::string>{"2F0", "2F1", "2BW0", "2BW1"});
  CHECK(texts(s.ranks[3]) == std::vector<std::string>{"3F0", "3BW0", "3F1", "3BW1"});
  validate(s);
  validate(lower(s));
}

TEST_CASE("interleaved follows Megatron's schedule table, groups of N through each chunk") {
  // Megatron's own example (get_schedule_table, PP2 N3 M5 VP2): virtual micro-batches 0..9 map to
  // micro-batches 0 1 2 0 1 2 3 4 3 4 and chunks 0 0 0 1 1 1 0 0 1 1. Rank 1's forwards follow it,
  // stage = chunk x p + rank; its warm-up is (p - r - 1) 2 + (v - 1) N = 3 forwards.
  const Schedule s = make_schedule(interleaved(2, 5, 2, 3));
  std::vector<std::string> forwards;
  for (const Action& a : s.ranks[1])
    if (a.op == Op::F) forwards.push_back(to_text(a));
  CHECK(forwards == std::vector<std::string>{"1F0", "1F1", "1F2", "3F0", "3F1", "3F2", "1F3", "1F4", "3F3", "3F4"});
  CHECK(texts(s.ranks[1]).at(3) == "3F0");
  CHECK(texts(s.ranks[1]).at(4) == "3BW0");  // backwards start in the last chunk
  validate(s);
  validate(lower(s));
}

TEST_CASE("invariants over many (p, m): valid, valid once lowered, activations held as documented") {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 13; ++m) {
      INFO("p" << p << " m" << m);
      for (const std::string name : {"gpipe", "1f1b", "zb-h1"}) {
        INFO(name);
        const Schedule s = make_schedule({name, p, m});
        CHECK_NOTHROW(validate(s));
        CHECK_NOTHROW(validate(lower(s)));
        const std::vector<int> held = peak_in_flight(s);
        const std::vector<int> until_b = peak_in_flight(s, HeldUntil::InputGrad);
        for (int r = 0; r < p; ++r) {
          INFO("rank " << r);
          if (name == "gpipe") CHECK(held[r] == m);
          // PipeDream-flush: rank r holds at most p - r micro-batches.
          if (name == "1f1b") CHECK(held[r] == std::min(p - r, m));
          if (name == "zb-h1") {
            // Until B the same as 1F1B; W deferred keeps up to p on every rank, which is 1F1B's worst rank.
            CHECK(until_b[r] == std::min(p - r, m));
            CHECK(held[r] == std::min(p, m));
          }
        }
      }
      for (int v = 2; v <= 3; ++v) {
        for (int n : {p, m, 2 * p}) {
          if (m < p || n < p || n > m || (m % n != 0 && m % n < p)) continue;
          INFO("interleaved v" << v << " N" << n);
          const Schedule s = make_schedule(interleaved(p, m, v, n));
          CHECK_NOTHROW(validate(s));
          CHECK_NOTHROW(validate(lower(s)));
          // Megatron's bound on outstanding backwards: the warm-up forwards plus one.
          const std::vector<int> held = peak_in_flight(s);
          for (int r = 0; r < p; ++r) CHECK(held[r] == std::min((p - r - 1) * 2 + (v - 1) * n + 1, m * v));
        }
      }
    }
  }
}
