#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <tuple>

#include "schedules/generators.hpp"

using namespace pw;

namespace {

// The test's own timing oracle, independent of the simulator: every rank runs its list in order;
// an action starts when the rank is free and its inputs are done (F(s-1,i) for F(s,i); F(s,i) and
// the backward of (s+1,i) for the backward of (s,i); B(s,i) for W(s,i)); communication is free.
// A BW hands its input gradient on only when it ends. Times are whole numbers, so == is exact.
struct Durations {
  double f, b, w;
};

double asap_makespan(const Schedule& s, Durations d) {
  const int stages = s.num_stages();
  std::map<std::tuple<char, int, int>, double> end;  // (part, stage, micro-batch) -> end time
  auto done = [&](char part, int stage, int mb) -> const double* {
    auto it = end.find({part, stage, mb});
    return it == end.end() ? nullptr : &it->second;
  };
  std::vector<size_t> next(s.ranks.size(), 0);
  std::vector<double> free_at(s.ranks.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < s.ranks.size(); ++r) {
      while (next[r] < s.ranks[r].size()) {
        const Action& a = s.ranks[r][next[r]];
        std::vector<std::tuple<char, int, int>> needs;
        double duration = 0;
        if (a.op == Op::F) {
          if (a.stage > 0) needs.emplace_back('F', a.stage - 1, a.microbatch);
          duration = d.f;
        } else if (a.op == Op::B || a.op == Op::BW) {
          needs.emplace_back('F', a.stage, a.microbatch);
          if (a.stage + 1 < stages) needs.emplace_back('B', a.stage + 1, a.microbatch);
          duration = a.op == Op::B ? d.b : d.b + d.w;
        } else if (a.op == Op::W) {
          needs.emplace_back('B', a.stage, a.microbatch);
          duration = d.w;
        } else {
          FAIL("the oracle times compute-only F/B/W/BW lists, got " << to_text(a));
        }
        double start = free_at[r];
        bool ready = true;
        for (const auto& [part, stage, mb] : needs) {
          const double* t = done(part, stage, mb);
          if (!t) ready = false;
          else start = std::max(start, *t);
        }
        if (!ready) break;
        const double finish = start + duration;
        if (a.op == Op::F) end[{'F', a.stage, a.microbatch}] = finish;
        if (a.op == Op::B || a.op == Op::BW) end[{'B', a.stage, a.microbatch}] = finish;
        if (a.op == Op::W || a.op == Op::BW) end[{'W', a.stage, a.microbatch}] = finish;
        free_at[r] = finish;
        ++next[r];
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < s.ranks.size(); ++r) REQUIRE(next[r] == s.ranks[r].size());
  return *std::max_element(free_at.begin(), free_at.end());
}

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
