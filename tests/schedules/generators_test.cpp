#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "core/error.hpp"
#include "schedules/generators.hpp"
#include "schedules/inflight.hpp"
#include "schedules/timing.hpp"
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
  CHECK(schedule_names() == std::vector<std::string>{"1f1b", "bfs", "dualpipe", "dualpipev", "gpipe", "interleaved",
                                                     "interleaved-overlap", "v-half", "v-min", "zb-auto", "zb-h1",
                                                     "zb-h2", "zb-v"});
  CHECK(error_of({"x", 4, 8}) ==
        "--schedule: unknown schedule 'x'; known: 1f1b, bfs, dualpipe, dualpipev, gpipe, interleaved, interleaved-overlap, "
        "v-half, v-min, zb-auto, zb-h1, zb-h2, zb-v");
  CHECK(chunks_per_rank("interleaved", 3) == 3);
  CHECK(chunks_per_rank("bfs", 4) == 4);
  CHECK(chunks_per_rank("1f1b", 3) == 1);
  CHECK(chunks_per_rank("zb-h1", 2) == 1);
  CHECK(chunks_per_rank("gpipe", 1) == 1);
  for (const char* v_family : {"zb-v", "v-half", "v-min", "dualpipev"}) {
    INFO(v_family);
    CHECK(chunks_per_rank(v_family, 1) == 2);
    CHECK(chunks_per_rank(v_family, 2) == 2);
  }
  try {
    chunks_per_rank("v-half", 3);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "--vpp: v-half runs exactly 2 chunks per rank in V order, got 3; omit --vpp or use --vpp 2");
  }
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
  pending.max_pending = 9;
  CHECK(error_of(pending) ==
        "--max-pending: zb-h1 keeps from --pp (4) to 2 x --pp (8) backward passes pending, got 9; use a value in 4..8");
  pending.name = "zb-h2";
  pending.max_pending = 3;
  CHECK(error_of(pending) ==
        "--max-pending: zb-h2 keeps from --pp (4) to 2 x --pp (8) backward passes pending, got 3; use a value in 4..8");
  for (int k = 4; k <= 8; ++k) {
    pending.max_pending = k;
    CHECK_NOTHROW(make_schedule(pending));
  }
  pending.name = "gpipe";
  CHECK(error_of(pending) ==
        "--max-pending: only zb-h1 and zb-h2 limit pending backward passes; omit it for --schedule gpipe");
}

TEST_CASE("constraints of the new families are checked up front, naming the option and the fix") {
  CHECK(error_of({"bfs", 4, 8}) ==
        "--vpp: bfs needs at least 2 chunks per rank, got 1; use --vpp 2 or more, or --schedule gpipe");
  CHECK(error_of({"bfs", 4, 3, 2}) ==
        "--microbatches: bfs needs at least as many micro-batches as --pp (4), got 3; use 4 or more");
  CHECK(error_of({"dualpipev", 4, 7}) ==
        "--microbatches: dualpipev needs at least 2 x --pp (8) micro-batches, got 7; use 8 or more");
  CHECK_NOTHROW(make_schedule({"dualpipev", 4, 8}));
  CHECK(error_of({"zb-v", 4, 8, 3}) ==
        "--vpp: zb-v runs exactly 2 chunks per rank in V order, got 3; omit --vpp or use --vpp 2");
  CHECK(error_of({"v-min", 4, 8, 4}) ==
        "--vpp: v-min runs exactly 2 chunks per rank in V order, got 4; omit --vpp or use --vpp 2");
  CHECK(make_schedule({"v-min", 4, 8, 2}).ranks == make_schedule({"v-min", 4, 8, 1}).ranks);
  CHECK(error_of({"zb-h2", 4, 8, 2}) ==
        "--vpp: zb-h2 runs one chunk per rank, got 2; use --schedule interleaved for --vpp 2");
  ScheduleSpec grouped{"bfs", 4, 8, 2};
  grouped.group_size = 4;
  CHECK(error_of(grouped) == "--group-size: only interleaved groups micro-batches; omit it for --schedule bfs");

  ScheduleSpec aut{"zb-auto", 3, 6};
  aut.stage_f = {1, 2};
  CHECK(error_of(aut) == "stage_f: zb-auto needs one value per stage (3 with --pp 3), got 2");
  aut.stage_f = {1, -2, 1};
  CHECK(error_of(aut) == "stage_f: zb-auto needs finite values >= 0, got -2");
  aut.stage_f = {};
  aut.comm_s = {0.1, 0.1, 0.1};
  CHECK(error_of(aut) == "comm_s: zb-auto needs one time per stage boundary (2 with --pp 3), got 3");
  aut.comm_s = {};
  aut.memory_limit_microbatches = {3, 0.5, 3};
  CHECK(error_of(aut) ==
        "memory_limit_microbatches: a stage must hold at least 1 micro-batch's activations, got 0.5; raise the limit");
  aut.memory_limit_microbatches = {};
  aut.stage_w_held = {0.5, 1.5, 1};
  CHECK(error_of(aut) == "stage_w_held: a fraction of the activations, from 0 to 1, got 1.5");
}

TEST_CASE("the V family places rank r's chunks on stages r and 2p - 1 - r") {
  for (const char* name : {"zb-v", "v-half", "v-min", "dualpipev"}) {
    INFO(name);
    const Schedule s = make_schedule({name, 3, 6});
    CHECK(s.name == name);
    CHECK_FALSE(s.lowered);
    CHECK(s.placement.kind == PlacementKind::V);
    CHECK(s.placement.stage_rank == std::vector<int>{0, 1, 2, 2, 1, 0});
  }
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

TEST_CASE("bfs is interleaved with group size m: every micro-batch through chunk c before chunk c + 1") {
  for (int p = 1; p <= 5; ++p) {
    for (int m = p; m <= 3 * p; ++m) {
      for (int v = 2; v <= 3; ++v) {
        INFO("p" << p << " m" << m << " v" << v);
        const Schedule bfs = make_schedule({"bfs", p, m, v});
        CHECK(bfs.name == "bfs");
        CHECK(bfs.ranks == make_schedule(interleaved(p, m, v, m)).ranks);
        // Breadth-first: on every rank the forwards of chunk c all come before those of chunk c + 1.
        for (const auto& list : bfs.ranks) {
          int last_chunk = 0;
          for (const Action& a : list) {
            if (a.op != Op::F) continue;
            CHECK(a.stage / p >= last_chunk);
            last_chunk = a.stage / p;
          }
        }
      }
    }
  }
}

TEST_CASE("zb-h1 and zb-h2 are one generator: max-pending k caps the micro-batches awaiting W") {
  // Rank r runs at most min(2(p - r) - 1, k - r) forwards ahead of its B and holds at most
  // min(k, 2p - 1) micro-batches until their W. k = p is ZB-H1 (1F1B's p on every rank), k = 2p is
  // ZB-H2 (2p - 1: the warm-up fills the time until the first B with forwards).
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 4 * p; ++m) {
      for (int k = p; k <= 2 * p; ++k) {
        INFO("p" << p << " m" << m << " k" << k);
        ScheduleSpec spec{"zb-h2", p, m};
        spec.max_pending = k;
        const Schedule s = make_schedule(spec);
        spec.name = "zb-h1";
        CHECK(make_schedule(spec).ranks == s.ranks);
        CHECK_NOTHROW(validate(s));
        CHECK_NOTHROW(validate(lower(s)));
        const std::vector<int> held = peak_in_flight(s);
        const std::vector<int> until_b = peak_in_flight(s, HeldUntil::InputGrad);
        for (int r = 0; r < p; ++r) {
          CHECK(held[r] <= std::min(k, 2 * p - 1));
          CHECK(until_b[r] <= std::min(2 * (p - r) - 1, k - r));
        }
        if (m >= 2 * p) CHECK(held[0] == std::min(k, 2 * p - 1));
      }
      CHECK(make_schedule({"zb-h2", p, m}).ranks == [&] {
        ScheduleSpec spec{"zb-h1", p, m};
        spec.max_pending = 2 * p;
        return make_schedule(spec).ranks;
      }());
    }
  }
}

TEST_CASE("zb-h2 on 4 ranks: 7 forwards before rank 0's first B, the Ws fill the cool-down") {
  const Schedule s = make_schedule({"zb-h2", 4, 12});
  const std::vector<std::string> rank0 = texts(s.ranks[0]);
  CHECK(std::vector<std::string>(rank0.begin(), rank0.begin() + 9) ==
        std::vector<std::string>{"0F0", "0F1", "0F2", "0F3", "0F4", "0F5", "0F6", "0B0", "0W0"});
  // The last rank alternates F and B and defers its Ws into the bubbles it would otherwise have.
  const std::vector<std::string> last = texts(s.ranks[3]);
  CHECK(std::vector<std::string>(last.begin(), last.begin() + 4) == std::vector<std::string>{"3F0", "3B0", "3F1", "3B1"});
  CHECK(std::vector<std::string>(last.end() - 3, last.end()) == std::vector<std::string>{"3W9", "3W10", "3W11"});
}

TEST_CASE("dualpipev follows PyTorch's ScheduleDualPipeV order") {
  // Derived by hand from ScheduleDualPipeV._calculate_single_rank_operations for 2 ranks and 4
  // micro-batches: rank 0 (stages 0 and 3) warms up with 2 chunk-0 forwards, a forward pair, one
  // zero-bubble round (3I0, 3W0, 3F1), one main-phase pair of composites, one drain round, then
  // splits its last chunk-0 backwards into B and W. Rank 1 (stages 1 and 2) holds the turn of the V:
  // its first chunk-1 backward cannot overlap the forward it depends on.
  const Schedule s = make_schedule({"dualpipev", 2, 4});
  CHECK(texts(s.ranks[0]) == std::vector<std::string>{"0F0", "0F1", "0F2", "3F0", "3B0", "3W0", "3F1", "0F3&3BW1",
                                                      "3F2&0BW0", "3BW2", "3F3&0BW1", "3BW3", "0B2", "0W2", "0B3",
                                                      "0W3"});
  CHECK(texts(s.ranks[1]) == std::vector<std::string>{"1F0", "2F0", "1F1", "2F1", "1F2", "2BW0", "2F2&1BW0",
                                                      "1F3&2BW1", "2F3&1BW1", "2BW2", "1BW2", "2B3", "1B3", "2W3",
                                                      "1W3"});
  validate(s);
  validate(lower(s));
}

TEST_CASE("dualpipe follows DeepSeek's DualPipe.step order") {
  // Derived by hand from deepseek-ai/DualPipe dualpipe/dualpipe.py (3da1bbe), DualPipe.step, for 2 ranks and 4
  // micro-batches. Rank r holds part r of copy 0 (stage r) and part 1 - r of copy 1 (stage 3 - r); copy 0 runs
  // micro-batches 0 and 2 from rank 0, copy 1 runs 1 and 3 from rank 1. Both ranks are middle ranks: step 2's
  // forward pair, then the main step's first forward alone before a full backward, one composite, and the
  // drain's second backward split into B and W.
  const Schedule s = make_schedule({"dualpipe", 2, 4});
  CHECK(s.copies == 2);
  CHECK(s.placement.kind == PlacementKind::V);
  CHECK(texts(s.ranks[0]) == std::vector<std::string>{"0F0", "3F1", "0F2", "3BW1", "3F3&0BW0", "3BW3", "0B2", "0W2"});
  CHECK(texts(s.ranks[1]) == std::vector<std::string>{"2F1", "1F0", "2F3", "1BW0", "1F2&2BW1", "1BW2", "2B3", "2W3"});
  validate(s);
  validate(lower(s));
}

TEST_CASE("dualpipe: valid, each micro-batch on its copy, p + 1 activation sets per rank, the published bubble") {
  // DualPipe's README (3da1bbe): activation per device PP + 1 (in one stage's micro-batches: a part of the model,
  // as 1F1B's PP counts them), and a bubble of (PP/2 - 1)(F&B + B - 3W), with F&B the overlapped pair and B
  // the full backward; exact here when F = B, the case its figure draws.
  for (int p = 2; p <= 8; p += 2) {
    for (int m = 2 * p; m <= 4 * p + 2; m += 2) {
      INFO("p" << p << " m" << m);
      const Schedule s = make_schedule({"dualpipe", p, m});
      CHECK_NOTHROW(validate(s));
      CHECK_NOTHROW(validate(lower(s)));
      // Each stage runs its copy's half of the micro-batches, forward and backward, once each.
      for (int st = 0; st < 2 * p; ++st) {
        long forwards = 0;
        for (const Action& a : s.ranks[static_cast<size_t>(s.placement.rank_of(st))]) {
          if ((a.op != Op::F && a.op != Op::FB) || a.stage != st) continue;
          CHECK(a.microbatch % 2 == st / p);
          ++forwards;
        }
        CHECK(forwards == m / 2);
      }
      const std::vector<int> held = peak_in_flight(s);
      CHECK(std::all_of(held.begin(), held.end(), [&](int h) { return h == p + 1; }));
      for (double w : {0.5, 1.0}) {
        const double f = 2, b = 2, pair = f + b + w;
        CHECK(asap_makespan(s, StageTimes::uniform(2 * p, f, b, w)) ==
              m * (f + b + w) + (p / 2 - 1) * (pair + (b + w) - 3 * w));
      }
    }
  }
  CHECK(error_of({"dualpipe", 3, 6}) ==
        "--pp: dualpipe runs the two copies' halves on an even number of ranks, got 3; use --pp 4 or --schedule dualpipev");
  CHECK(error_of({"dualpipe", 4, 9}) ==
        "--microbatches: dualpipe needs an even count of at least 2 x --pp (8), half for each copy, got 9; use 10");
  CHECK(error_of({"dualpipe", 4, 6}) ==
        "--microbatches: dualpipe needs an even count of at least 2 x --pp (8), half for each copy, got 6; use 8");
  CHECK(model_copies("dualpipe") == 2);
  CHECK(model_copies("dualpipev") == 1);
}

TEST_CASE("V family and dualpipev: valid, valid once lowered, activations as published") {
  // Peak activation sets per rank, in chunk micro-batches (one chunk is half a rank's layers, so a
  // rank's whole-model micro-batch is 2 of them; 1F1B holds p of those on rank 0):
  //   zb-v       2p:                p micro-batches, 1F1B's worst rank (Qi et al. 2023, section 6)
  //   v-half     2 floor((p+2)/2):  (p + 2)/2 for even p, (p + 1)/2 for odd p (Qi et al. 2024)
  //   v-min      2 floor((p+4)/3):  (p + 4)/3 rounded down
  //   dualpipev  2p + 1:            p + 1/2; a composite's forward allocates before its backward frees
  // once m is large enough to reach the steady state (m >= p; dualpipev needs m >= 2p anyway), and no
  // more than that for smaller m.
  for (int p = 1; p <= 7; ++p) {
    for (int m = 1; m <= 3 * p + 2; ++m) {
      for (const std::string name : {"zb-v", "v-half", "v-min", "dualpipev"}) {
        if (name == "dualpipev" && m < 2 * p) continue;
        INFO(name << " p" << p << " m" << m);
        const Schedule s = make_schedule({name, p, m});
        CHECK_NOTHROW(validate(s));
        CHECK_NOTHROW(validate(lower(s)));
        const int published = name == "zb-v"     ? 2 * p
                              : name == "v-half" ? 2 * ((p + 2) / 2)
                              : name == "v-min"  ? 2 * ((p + 4) / 3)
                                                 : 2 * p + 1;
        const std::vector<int> held = peak_in_flight(s);
        const int worst = *std::max_element(held.begin(), held.end());
        CHECK(worst <= published);
        if (m >= p) CHECK(worst == published);
      }
    }
  }
}

TEST_CASE("dualpipev: F&B composites fill the main phase") {
  // Rank r runs 2(m - 2p + r + 1) composites in the main phase (the last rank one fewer: the turn of
  // the V) and p - r - 1 more in the drain.
  for (int p = 1; p <= 6; ++p) {
    for (int m = 2 * p; m <= 4 * p; ++m) {
      const Schedule s = make_schedule({"dualpipev", p, m});
      for (int r = 0; r < p; ++r) {
        INFO("p" << p << " m" << m << " r" << r);
        const auto composites = std::count_if(s.ranks[r].begin(), s.ranks[r].end(), [](const Action& a) { return a.op == Op::FB; });
        CHECK(composites == 2 * (m - 2 * p + r + 1) - (r == p - 1 ? 1 : 0) + (p - r - 1));
      }
    }
  }
}

TEST_CASE("zb-auto keeps each stage within its memory limit") {
  // A stage's F allocates one activation set; B frees 1 - w_held of it and W the rest.
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 3 * p; ++m) {
      for (const double limit : {1.0, 2.0, 2.5, static_cast<double>(p), 2.0 * p}) {
        INFO("p" << p << " m" << m << " limit " << limit);
        ScheduleSpec spec{"zb-auto", p, m};
        spec.memory_limit_microbatches.assign(p, limit);
        const Schedule s = make_schedule(spec);
        CHECK_NOTHROW(validate(s));
        CHECK_NOTHROW(validate(lower(s)));
        for (const int held : peak_in_flight(s)) CHECK(held <= limit);
        spec.stage_w_held.assign(p, 0.25);
        const Schedule partial = make_schedule(spec);
        CHECK_NOTHROW(validate(partial));
        for (const auto& list : partial.ranks) {
          double held = 0, peak = 0;
          for (const Action& a : list) {
            held += a.op == Op::F ? 1.0 : a.op == Op::B ? -0.75 : a.op == Op::W ? -0.25 : -1.0;
            peak = std::max(peak, held);
          }
          CHECK(peak <= limit + 1e-9);
        }
      }
    }
  }
}

TEST_CASE("zb-auto: whatever order the stage costs pick, each rank runs every micro-batch's F, B and W once") {
  // The plan search bounds a zb-auto candidate by its busiest rank's F + B + W before the order is made from the
  // split's stage costs (planner/search.cpp), which needs every order it may pick to hold the same actions.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> time(0.1, 3.0), limit(1.0, 8.0), comm(0.0, 0.5);
  for (int trial = 0; trial < 60; ++trial) {
    const int p = 1 + trial % 6, m = p + trial % 9;
    ScheduleSpec spec{"zb-auto", p, m};
    for (int r = 0; r < p; ++r) {
      spec.stage_f.push_back(time(rng));
      spec.stage_b.push_back(time(rng));
      spec.stage_w.push_back(time(rng));
      spec.memory_limit_microbatches.push_back(trial % 2 ? limit(rng) : static_cast<double>(p));
      if (r + 1 < p) spec.comm_s.push_back(comm(rng));
    }
    const Schedule s = make_schedule(spec);
    INFO("trial " << trial << ": p " << p << " m " << m);
    REQUIRE(s.num_ranks() == p);
    for (const std::vector<Action>& list : s.ranks) {
      std::vector<int> f(static_cast<size_t>(m), 0), b(f), w(f);
      for (const Action& a : list) {
        REQUIRE(a.op != Op::FB);
        const auto mb = static_cast<size_t>(a.microbatch);
        if (a.op == Op::F) ++f[mb];
        if (a.op == Op::B || a.op == Op::BW) ++b[mb];
        if (a.op == Op::W || a.op == Op::BW) ++w[mb];
      }
      CHECK(f == std::vector<int>(static_cast<size_t>(m), 1));
      CHECK(b == f);
      CHECK(w == f);
    }
  }
}

TEST_CASE("interleaved-overlap: one more warm-up forward, then each step's F and BW as one composite") {
  // megatron/core/pipeline_parallel/schedules.py: num_warmup_microbatches + 1 with
  // overlap_moe_expert_parallel_comm, then combined 1F1B steps.
  for (int p : {1, 2, 4}) {
    for (int m : {p, 2 * p, 3 * p}) {
      const Schedule merged = make_schedule({"interleaved-overlap", p, m, 2});
      INFO("p " << p << " m " << m);
      validate(merged);
      CHECK(merged.name == "interleaved-overlap");
      for (int r = 0; r < p; ++r) {
        const std::vector<Action>& list = merged.ranks[static_cast<size_t>(r)];
        const int warmup = std::min((p - r - 1) * 2 + p + 1, 2 * m);
        int composites = 0, forwards = 0, backwards = 0;
        for (const Action& a : list) {
          composites += a.op == Op::FB ? 1 : 0;
          forwards += a.op == Op::F ? 1 : 0;
          backwards += a.op == Op::BW ? 1 : 0;
          if (a.op == Op::FB) CHECK(a.microbatch != a.microbatch2);
        }
        CHECK(forwards == warmup);
        CHECK(composites == 2 * m - warmup);
        CHECK(backwards == warmup);
        // The warm-up forwards first, the cool-down backwards last.
        for (int k = 0; k < warmup; ++k) CHECK(list[static_cast<size_t>(k)].op == Op::F);
      }
    }
  }
}
