#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "core/error.hpp"
#include "schedules/generators.hpp"
#include "schedules/timing.hpp"

using namespace pw;

namespace {

// The test's own timing oracle, independent of the simulator and of schedules/timing.hpp: every rank
// runs its list in order; an action starts when the rank is free and its inputs are done (F(s-1,i)
// for F(s,i); F(s,i) and the backward of (s+1,i) for the backward of (s,i); B(s,i) for W(s,i)); an
// input made on another rank arrives comm[boundary] later. A BW hands its input gradient on only
// when it ends; an F&B composite (fb[s] long, s its forward's stage) hands on both outputs when it
// ends. Times are whole or half numbers, so == is exact.
struct Durations {
  double f, b, w;
};

struct Costs {
  std::vector<double> f, b, w;  // per stage
  std::vector<double> comm;     // per boundary s -> s + 1; empty: free
  std::vector<double> fb;       // per stage; empty: F + B + W of the halves
};

Costs uniform(int stages, Durations d) {
  return Costs{std::vector<double>(stages, d.f), std::vector<double>(stages, d.b), std::vector<double>(stages, d.w), {}, {}};
}

struct OracleRun {
  double makespan = 0;
  std::vector<double> busy;  // per rank
};

OracleRun run_oracle(const Schedule& s, const Costs& c) {
  // A micro-batch's pipeline is its copy's stages (bidirectional DualPipe has two copies of the model).
  const int stages = s.num_stages() / s.copies;
  std::map<std::tuple<char, int, int>, double> end;  // (part, stage, micro-batch) -> end time
  std::vector<size_t> next(s.ranks.size(), 0);
  std::vector<double> free_at(s.ranks.size(), 0);
  OracleRun run;
  run.busy.assign(s.ranks.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < s.ranks.size(); ++r) {
      while (next[r] < s.ranks[r].size()) {
        const Action& a = s.ranks[r][next[r]];
        std::vector<std::tuple<char, int, int>> needs;
        auto forward_needs = [&](int st, int mb) {
          if (st % stages > 0) needs.emplace_back('F', st - 1, mb);
        };
        auto backward_needs = [&](int st, int mb) {
          needs.emplace_back('F', st, mb);
          if (st % stages + 1 < stages) needs.emplace_back('B', st + 1, mb);
        };
        double duration = 0;
        if (a.op == Op::F) {
          forward_needs(a.stage, a.microbatch);
          duration = c.f[a.stage];
        } else if (a.op == Op::B || a.op == Op::BW) {
          backward_needs(a.stage, a.microbatch);
          duration = a.op == Op::B ? c.b[a.stage] : c.b[a.stage] + c.w[a.stage];
        } else if (a.op == Op::W) {
          needs.emplace_back('B', a.stage, a.microbatch);
          duration = c.w[a.stage];
        } else if (a.op == Op::FB) {
          forward_needs(a.stage, a.microbatch);
          backward_needs(a.stage2, a.microbatch2);
          duration = !c.fb.empty() ? c.fb[a.stage] : c.f[a.stage] + c.b[a.stage2] + c.w[a.stage2];
        } else {
          FAIL("the oracle times compute-only lists, got " << to_text(a));
        }
        double start = free_at[r];
        bool ready = true;
        for (const auto& [part, stage, mb] : needs) {
          const auto it = end.find({part, stage, mb});
          if (it == end.end()) {
            ready = false;
            break;
          }
          // Only neighbours' tensors cross ranks: F(s-1) over boundary s-1, B(s+1) over boundary s.
          const bool remote = s.placement.rank_of(stage) != static_cast<int>(r);
          const double delay = remote && !c.comm.empty() ? c.comm[part == 'F' ? stage : stage - 1] : 0;
          start = std::max(start, it->second + delay);
        }
        if (!ready) break;
        const double finish = start + duration;
        if (a.op == Op::F || a.op == Op::FB) end[{'F', a.stage, a.microbatch}] = finish;
        if (a.op == Op::B || a.op == Op::BW) end[{'B', a.stage, a.microbatch}] = finish;
        if (a.op == Op::W || a.op == Op::BW) end[{'W', a.stage, a.microbatch}] = finish;
        if (a.op == Op::FB) {
          end[{'B', a.stage2, a.microbatch2}] = finish;
          end[{'W', a.stage2, a.microbatch2}] = finish;
        }
        free_at[r] = finish;
        run.busy[r] += duration;
        ++next[r];
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < s.ranks.size(); ++r) REQUIRE(next[r] == s.ranks[r].size());
  run.makespan = *std::max_element(free_at.begin(), free_at.end());
  return run;
}

double asap_makespan(const Schedule& s, Durations d) { return run_oracle(s, uniform(s.num_stages(), d)).makespan; }

const Durations kDurations[] = {{1, 1, 1}, {2, 3, 1}, {1, 2, 1}, {2, 2, 1}, {3, 2, 2}};

}  // namespace

TEST_CASE("oracle: gpipe and 1f1b take (m + p - 1)(F + B + W)") {
  for (const Durations d : kDurations) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 12; ++m) {
        INFO("F" << d.f << " B" << d.b << " W" << d.w << " p" << p << " m" << m);
        const double closed = (m + p - 1) * (d.f + d.b + d.w);
        const double gpipe = asap_makespan(make_schedule({"gpipe", p, m}), d);
        const double one_f_one_b = asap_makespan(make_schedule({"1f1b", p, m}), d);
        CHECK(gpipe == closed);
        // With m < p a rank's warm-up is cut short and the formula no longer holds; never slower than GPipe.
        if (m >= p) CHECK(one_f_one_b == closed);
        else CHECK(one_f_one_b <= closed);
      }
    }
  }
}

TEST_CASE("oracle: interleaved takes m(F + B + W) + (p - 1)(F + B + W)/v") {
  // Durations are per chunk (f = F/v, ...), so the closed form reads m v (f + b + w) + (p - 1)(f + b + w).
  for (const Durations d : kDurations) {
    for (int p = 1; p <= 5; ++p) {
      for (int v = 2; v <= 4; ++v) {
        for (int m = p; m <= 4 * p; ++m) {
          for (int n : {p, 2 * p, m}) {
            if (n > m || (m % n != 0 && m % n < p)) continue;
            INFO("F" << d.f << " B" << d.b << " W" << d.w << " p" << p << " v" << v << " m" << m << " N" << n);
            ScheduleSpec spec{"interleaved", p, m, v};
            spec.group_size = n;
            const double chunk = d.f + d.b + d.w;
            CHECK(asap_makespan(make_schedule(spec), d) == m * v * chunk + (p - 1) * chunk);
          }
        }
      }
    }
  }
}

TEST_CASE("oracle: zb-h1 idles (p - 1)(F + B - W) per rank") {
  // The zero-bubble paper's ZB-H1 figure: with W <= F and W <= B one iteration takes
  // m(F + B + W) + (p - 1)(F + B - W); for F = B = W that is 3mF + (p - 1)F, a third of 1F1B's bubble.
  for (const Durations d : kDurations) {
    if (d.w > d.f || d.w > d.b) continue;
    for (int p = 1; p <= 8; ++p) {
      for (int m = p; m <= 3 * p + 1; ++m) {
        INFO("F" << d.f << " B" << d.b << " W" << d.w << " p" << p << " m" << m);
        const double zb = asap_makespan(make_schedule({"zb-h1", p, m}), d);
        CHECK(zb == m * (d.f + d.b + d.w) + (p - 1) * (d.f + d.b - d.w));
        if (p > 1) CHECK(zb < asap_makespan(make_schedule({"1f1b", p, m}), d));
      }
    }
  }
  CHECK(asap_makespan(make_schedule({"zb-h1", 4, 8}), {1, 1, 1}) == 3 * 8 + 3);
}

TEST_CASE("oracle: zb-h1 with fewer micro-batches than ranks is still no slower than 1f1b") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = 1; m < p; ++m) {
      INFO("p" << p << " m" << m);
      CHECK(asap_makespan(make_schedule({"zb-h1", p, m}), {1, 1, 1}) <=
            asap_makespan(make_schedule({"1f1b", p, m}), {1, 1, 1}));
    }
  }
}

TEST_CASE("oracle: bfs takes m v (F + B + W) + (p - 1)(F + B + W), like interleaved") {
  // Per-chunk durations as above. Breadth-first and depth-first interleaving fill and drain alike
  // (Lamy-Poirier 2023); they differ in memory (bfs holds nearly all m micro-batches of every chunk).
  for (const Durations d : kDurations) {
    for (int p = 1; p <= 5; ++p) {
      for (int v = 2; v <= 3; ++v) {
        for (int m = p; m <= 3 * p; ++m) {
          INFO("F" << d.f << " B" << d.b << " W" << d.w << " p" << p << " v" << v << " m" << m);
          const double chunk = d.f + d.b + d.w;
          CHECK(asap_makespan(make_schedule({"bfs", p, m, v}), d) == m * v * chunk + (p - 1) * chunk);
        }
      }
    }
  }
}

TEST_CASE("oracle: zb-h2 takes m(F + B + W) + (p - 1) max(F, F + B - 2W)") {
  // The zero-bubble paper gives ZB-H2 an idle time of (p - 1)(F + B - 2W) per rank, zero when
  // F = B = W. That counts the steady state with optimizer post-validation, where the next
  // iteration's forwards fill the tail of rank 0. In one synchronised iteration the last rank still
  // cannot start before the first micro-batch's forward has crossed p - 1 ranks, (p - 1)F, so the
  // iteration takes the larger of the two: exactly the paper's formula when B >= 2W, the start-up
  // when B < 2W (with F = B = W: 3mF + (p - 1)F, against 1F1B's 3mF + 3(p - 1)F).
  // It needs m >= 2p - 1 (the warm-up's 2p - 1 forwards on rank 0) and holds where the order, fixed
  // for F = B = W, still fits: W <= F or B <= 2F. Outside that (e.g. F = 1, B = 3, W = 2) it puts a
  // W into a gap only F long before a backward arrives (rank 0 between B0 and B1 on 2 ranks), the
  // overrun delays the backward chain, and only what follows holds: zb-h2 is never slower than zb-h1.
  for (double f = 1; f <= 4; ++f) {
    for (double b = 1; b <= 4; ++b) {
      for (double w = 1; w <= 4; ++w) {
        const Durations d{f, b, w};
        for (int p = 1; p <= 6; ++p) {
          for (int m = std::max(1, 2 * p - 1); m <= 4 * p; ++m) {
            INFO("F" << f << " B" << b << " W" << w << " p" << p << " m" << m);
            const double zb2 = asap_makespan(make_schedule({"zb-h2", p, m}), d);
            if (w <= f || b <= 2 * f) CHECK(zb2 == m * (f + b + w) + (p - 1) * std::max(f, f + b - 2 * w));
            CHECK(zb2 <= asap_makespan(make_schedule({"zb-h1", p, m}), d));
          }
        }
      }
    }
  }
  CHECK(asap_makespan(make_schedule({"zb-h2", 4, 8}), {1, 1, 1}) == 3 * 8 + 3);
  CHECK(asap_makespan(make_schedule({"zb-h2", 4, 8}), {1, 3, 1}) == 5 * 8 + 3 * 2);
}

TEST_CASE("oracle: raising --max-pending from p to 2p never slows an iteration") {
  for (const Durations d : kDurations) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = p; m <= 3 * p; ++m) {
        double previous = asap_makespan(make_schedule({"1f1b", p, m}), d);
        for (int k = p; k <= 2 * p; ++k) {
          INFO("F" << d.f << " B" << d.b << " W" << d.w << " p" << p << " m" << m << " k" << k);
          ScheduleSpec spec{"zb-h1", p, m};
          spec.max_pending = k;
          const double t = asap_makespan(make_schedule(spec), d);
          CHECK(t <= previous);
          previous = t;
        }
      }
    }
  }
}

TEST_CASE("oracle: zb-v idles (p - 1)F per rank when F = B = W") {
  // Durations per chunk (half a rank's layers). A rank does 2m chunk passes of each kind, 6mF of
  // work; with F = B = W the V order has no bubble but the start-up of the chain, (p - 1)F (Qi et al.
  // 2023, section 6: "zero bubble" when F = B = W), once m >= 2p. When the three differ the order no
  // longer interlocks (e.g. F = 3, B = 2, W = 1 on 4 ranks idles 11, not 9 or 3); what holds is that
  // it never loses to 1F1B on the same ranks (whose stage is both chunks: durations doubled).
  for (double c : {1.0, 2.0, 3.0}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 2 * p; m <= 5 * p; ++m) {
        INFO("F=B=W=" << c << " p" << p << " m" << m);
        CHECK(asap_makespan(make_schedule({"zb-v", p, m}), {c, c, c}) == 6 * m * c + (p - 1) * c);
      }
    }
  }
  for (const Durations d : kDurations) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 4 * p; ++m) {
        INFO("F" << d.f << " B" << d.b << " W" << d.w << " p" << p << " m" << m);
        CHECK(asap_makespan(make_schedule({"zb-v", p, m}), d) <=
              asap_makespan(make_schedule({"1f1b", p, m}), {2 * d.f, 2 * d.b, 2 * d.w}));
      }
    }
  }
  CHECK(asap_makespan(make_schedule({"zb-v", 4, 8}), {3, 2, 1}) == 2 * 8 * (3 + 2 + 1) + 11);
}

TEST_CASE("oracle: v-half and v-min bubbles are about p/2m and 2p/3m of the ideal time") {
  // With F = B = W = 1 per chunk a rank's work is 6m. The controllable-memory paper (Qi et al. 2024,
  // table 1) gives bubble rates of about p/2m (V-Half) and 2p/3m (V-Min): 3p and 4p units of idle
  // time. The squeeze of the warm-up and cool-down recovers a few of them; in this construction,
  // from m >= p + 2 on (with fewer the warm-up runs into the cool-down and idles more), exactly
  //   v-half  3p - 7 (even p, whose blocks carry the 3-slot gap g) or 3p - 4 (odd p); 1 for p = 2
  //   v-min   4p - 7 (3 | p, g = 2) or 4p - 5 (otherwise)
  // independent of m, so the rates fall as 1/m like the paper's.
  for (int p = 2; p <= 12; ++p) {
    for (int m = p + 2; m <= 4 * p + 2; ++m) {
      INFO("p" << p << " m" << m);
      const double half = asap_makespan(make_schedule({"v-half", p, m}), {1, 1, 1}) - 6 * m;
      const double min = asap_makespan(make_schedule({"v-min", p, m}), {1, 1, 1}) - 6 * m;
      CHECK(half == (p == 2 ? 1 : p % 2 == 0 ? 3 * p - 7 : 3 * p - 4));
      CHECK(min == (p % 3 == 0 ? 4 * p - 7 : 4 * p - 5));
      CHECK(half <= 3 * p);
      CHECK(min <= 4 * p);
    }
  }
}

TEST_CASE("oracle: dualpipev's worst rank idles (p - 1)(F&B + B - 2W), the DualPipe formula") {
  // DeepSeek's table gives DualPipe (PP/2 - 1)(F&B + B_full - 3W) of bubble, B_full = B + W, with PP
  // stages; folded into a V, PP = 2p. With F&B the overlapped pair's own time, the worst rank's idle
  // time is exactly (p - 1)(F&B + B - 2W) when the V's turn pairs equal halves, F = B, W <= F and
  // B + W <= F&B <= F + B + W (the overlap saves at most a forward). Other durations shift the
  // chain by a little (F = 1, B = 2, W = 1, F&B = 3 on 4 ranks: 8, not 9); what holds there is that
  // the composites' overlap never makes the iteration slower.
  for (double f = 1; f <= 3; ++f) {
    for (double w = 1; w <= f; ++w) {
      for (double saved = 0; saved <= f; saved += 0.5) {
        const double fb = f + f + w - saved;
        if (fb < f + w) continue;
        for (int p = 1; p <= 6; ++p) {
          for (int m = 2 * p; m <= 4 * p; ++m) {
            INFO("F=B=" << f << " W" << w << " F&B " << fb << " p" << p << " m" << m);
            Costs c = uniform(2 * p, {f, f, w});
            c.fb.assign(2 * p, fb);
            const OracleRun run = run_oracle(make_schedule({"dualpipev", p, m}), c);
            double worst_idle = 0;
            for (const double busy : run.busy) worst_idle = std::max(worst_idle, run.makespan - busy);
            CHECK(worst_idle == (p - 1) * (fb + f - 2 * w));
          }
        }
      }
    }
  }
  for (const Durations d : kDurations) {
    for (int p = 1; p <= 5; ++p) {
      for (int m = 2 * p; m <= 3 * p; ++m) {
        INFO("F" << d.f << " B" << d.b << " W" << d.w << " p" << p << " m" << m);
        const Schedule s = make_schedule({"dualpipev", p, m});
        Costs c = uniform(2 * p, d);
        const double plain = run_oracle(s, c).makespan;
        c.fb.assign(2 * p, d.f + d.b + d.w - d.w / 2);
        CHECK(run_oracle(s, c).makespan <= plain);
      }
    }
  }
}

TEST_CASE("oracle: zb-auto is never slower than 1f1b under the same memory") {
  // Random per-stage F, B, W and communication times; the memory limit is what 1F1B needs (p
  // micro-batches on the first stage). zb-auto keeps the fastest of the heuristic's variants and
  // 1F1B itself, timed by its own ASAP timer; this checks it with the test's oracle.
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> half_units(1, 8), comm_units(0, 2);
  int faster = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int p = 1 + trial % 8, m = p + (trial * 5) % (3 * p);
    ScheduleSpec spec{"zb-auto", p, m};
    Costs c;
    for (int j = 0; j < p; ++j) {
      c.f.push_back(half_units(rng) / 2.0);
      c.b.push_back(half_units(rng) / 2.0);
      c.w.push_back(half_units(rng) / 2.0);
      if (j + 1 < p) c.comm.push_back(comm_units(rng) / 2.0);
    }
    spec.stage_f = c.f;
    spec.stage_b = c.b;
    spec.stage_w = c.w;
    spec.comm_s = c.comm;
    INFO("trial " << trial << " p" << p << " m" << m);
    const double automatic = run_oracle(make_schedule(spec), c).makespan;
    const double one_f_one_b = run_oracle(make_schedule({"1f1b", p, m}), c).makespan;
    CHECK(automatic <= one_f_one_b);
    if (automatic < one_f_one_b) ++faster;
  }
  // Splitting B and W pays on nearly every pipeline of more than one rank.
  CHECK(faster > 200);
}

TEST_CASE("oracle: zb-auto with uniform times matches the handcrafted ZB-H1") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = p; m <= 3 * p; ++m) {
      INFO("p" << p << " m" << m);
      CHECK(asap_makespan(make_schedule({"zb-auto", p, m}), {1, 1, 1}) ==
            asap_makespan(make_schedule({"zb-h1", p, m}), {1, 1, 1}));
    }
  }
}

TEST_CASE("schedules/timing.hpp agrees with the oracle on every family") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> half_units(1, 6), comm_units(0, 2);
  for (const std::string& name : schedule_names()) {
    for (int p = 1; p <= 4; ++p) {
      if (name == "dualpipe" && p % 2 != 0) continue;  // its two halves need an even pp
      const bool v_shaped =
          name == "zb-v" || name == "v-half" || name == "v-min" || name == "dualpipev" || name == "dualpipe";
      const int chunks = chunks_per_rank(name, 2);
      const int stages = p * (v_shaped ? 2 : chunks);
      const int m = 2 * p;
      INFO(name << " p" << p);
      const Schedule s = make_schedule({name, p, m, chunks});
      Costs c;
      StageTimes t;
      for (int j = 0; j < stages; ++j) {
        c.f.push_back(half_units(rng) / 2.0);
        c.b.push_back(half_units(rng) / 2.0);
        c.w.push_back(half_units(rng) / 2.0);
        c.fb.push_back(c.f.back() + c.b.back());
        if (j + 1 < stages) c.comm.push_back(comm_units(rng) / 2.0);
      }
      t.f = c.f;
      t.b = c.b;
      t.w = c.w;
      t.comm = c.comm;
      t.fb = c.fb;
      CHECK(asap_makespan(s, t) == run_oracle(s, c).makespan);
      CHECK(asap_makespan(lower(s), t) == run_oracle(s, c).makespan);
    }
  }
}

TEST_CASE("schedules/timing.hpp: start and end per action, communication on cross-rank inputs only") {
  // 1F1B on 2 ranks, 1 micro-batch, F = 1, B = 2, W = 1, 0.5 s each way between the ranks:
  // rank 0 F [0, 1]; rank 1 F [1.5, 2.5], BW [2.5, 5.5]; rank 0 BW [6, 9].
  StageTimes t = StageTimes::uniform(2, 1, 2, 1);
  t.comm = {0.5};
  const ScheduleTiming timing = asap_timing(make_schedule({"1f1b", 2, 1}), t);
  CHECK(timing.start == std::vector<std::vector<double>>{{0, 6}, {1.5, 2.5}});
  CHECK(timing.end == std::vector<std::vector<double>>{{1, 9}, {2.5, 5.5}});
  CHECK(timing.makespan == 9);
  // Stages 1 and 2 share rank 1 in the V: the turn costs no communication. One micro-batch: 4 F and
  // 4 B along the chain, 4 crossings of 10 s, rank 1's 2W0 between its two backwards (PyTorch's
  // order) and rank 0's closing 0W0: 50.
  StageTimes v = StageTimes::uniform(4, 1, 1, 1);
  v.comm = {10, 10, 10};
  CHECK(asap_makespan(make_schedule({"zb-v", 2, 1}), v) == 4 + 4 + 4 * 10 + 1 + 1);
}

TEST_CASE("schedules/timing.hpp: the stage times must fit the schedule") {
  const Schedule s = make_schedule({"1f1b", 2, 2});
  auto error_of = [](const StageTimes& t, const Schedule& schedule) {
    try {
      asap_timing(schedule, t);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(error_of(StageTimes::uniform(3, 1, 1, 1), s) == "stage times: need one F, B and W time per stage (2), got 3, 3 and 3");
  StageTimes t = StageTimes::uniform(2, 1, 1, 1);
  t.comm = {1, 1};
  CHECK(error_of(t, s) == "stage times: comm needs one time per stage boundary (1), got 2");
  t.comm = {};
  t.fb = {1};
  CHECK(error_of(t, s) == "stage times: fb needs one time per stage (2), got 1");
  Schedule stuck = s;
  std::swap(stuck.ranks[1][0], stuck.ranks[1][1]);
  t.fb = {};
  // Rank 1 waits on its own later F; rank 0, the first rank reported, waits on rank 1.
  CHECK(error_of(t, stuck) == "schedule 1f1b: cannot be timed, rank 0 waits forever at step 2: '0BW0'");
}

TEST_CASE("schedules/timing.hpp: an F&B composite's all-to-alls take their SM share from the compute they overlap") {
  // F 4 s of which 1 s all-to-all, B + W 3 + 2 s of which 2 s all-to-all: 3 + 3 s of compute covers both
  // all-to-alls (3 s), which hold a quarter of the SMs meanwhile: 6 + 0.75 s; without the share, 6 s.
  const Schedule s = make_schedule({"dualpipev", 2, 8});
  StageTimes t = StageTimes::uniform(4, 4, 3, 2);
  t.comm_f.assign(4, 1);
  t.comm_b.assign(4, 2);
  for (double share : {0.0, 0.25}) {
    t.all_to_all_sm_share = share;
    const ScheduleTiming timing = asap_timing(s, t);
    int composites = 0;
    for (size_t r = 0; r < s.ranks.size(); ++r)
      for (size_t i = 0; i < s.ranks[r].size(); ++i)
        if (s.ranks[r][i].op == Op::FB) {
          CHECK(timing.end[r][i] - timing.start[r][i] == 6 + 3 * share);
          ++composites;
        }
    CHECK(composites > 0);
  }
}

TEST_CASE("schedules/timing.hpp: each stage's last gradient action, as asap_timing times it") {
  // asap_gradient_timing keeps, per stage, the start and end of the last W, BW or F&B (its backward half) by
  // end; asap_timing's every action, scanned rank by rank in list order, gives the same.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  for (const char* name : {"1f1b", "interleaved", "zb-h1", "zb-v", "dualpipev", "gpipe"}) {
    const Schedule s = make_schedule({name, 4, 8, std::string(name) == "interleaved" ? 2 : 1});
    StageTimes t;
    for (int st = 0; st < s.num_stages(); ++st) {
      t.f.push_back(time(rng));
      t.b.push_back(time(rng));
      t.w.push_back(time(rng));
      t.fb.push_back(0);
      if (st + 1 < s.num_stages()) t.comm.push_back(time(rng) / 4);
    }
    const ScheduleTiming all = asap_timing(s, t);
    std::vector<double> start(static_cast<size_t>(s.num_stages()), 0.0), end(start);
    for (size_t r = 0; r < s.ranks.size(); ++r)
      for (size_t i = 0; i < s.ranks[r].size(); ++i) {
        const Action& a = s.ranks[r][i];
        const int stage = a.op == Op::W || a.op == Op::BW ? a.stage : a.op == Op::FB ? a.stage2 : -1;
        if (stage >= 0 && all.end[r][i] >= end[static_cast<size_t>(stage)]) {
          end[static_cast<size_t>(stage)] = all.end[r][i];
          start[static_cast<size_t>(stage)] = all.start[r][i];
        }
      }
    const GradientTiming last = asap_gradient_timing(s, t);
    INFO(name);
    CHECK(last.makespan == all.makespan);
    CHECK(last.makespan == asap_makespan(s, t));
    CHECK(last.start == start);
    CHECK(last.end == end);
  }
}
