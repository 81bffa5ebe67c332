// Requests drawn as sglang.bench_serving draws them (serving/numpy_legacy_random.hpp, serving/serving_workload.hpp).
// The expected numbers are numpy 2.4.6's own (np.random.seed, randint, exponential); python/tests checks more
// seeds and ranges against numpy itself.
#include <catch2/catch.hpp>

#include <vector>

#include "../error_text.hpp"
#include "serving/numpy_legacy_random.hpp"
#include "serving/serving_workload.hpp"

using namespace pw;

TEST_CASE("numpy's legacy generator: randint, random_sample and exponential draw for draw") {
  NumpyLegacyRandom one(1);
  std::vector<std::int64_t> drawn;
  for (int i = 0; i < 10; ++i) drawn.push_back(one.randint(1, 1001));
  CHECK(drawn == std::vector<std::int64_t>{38, 236, 909, 73, 768, 906, 716, 646, 848, 961});
  // A range of one number draws nothing: the stream goes on where it was.
  NumpyLegacyRandom zero(0);
  CHECK(zero.randint(7, 8) == 7);
  CHECK(zero.randint(1, 4294967296) == 2357136045);  // 2^32 - 1 numbers: the full mask
  CHECK(zero.randint(1, 4294967296) == 2546248240);
  CHECK(zero.randint(1, 4294967296) == 3071714934);
  CHECK(zero.randint(5, 70000) == 45896);
  NumpyLegacyRandom last(4294967295u);
  CHECK(last.randint(1, 8001) == 2468);
  CHECK(last.randint(1, 8001) == 291);
  // np.random.seed(1); randint(1, 1025, size=5); exponential(1/4) three times.
  NumpyLegacyRandom gaps(1);
  for (int i = 0; i < 5; ++i) gaps.randint(1, 1025);
  CHECK(gaps.exponential(0.25) == Approx(0.03427714519332574).epsilon(1e-15));
  CHECK(gaps.exponential(0.25) == Approx(1.7372785534032573).epsilon(1e-15));
  CHECK(gaps.exponential(0.25) == Approx(0.06732598964421642).epsilon(1e-15));
  CHECK(bad_input([] { NumpyLegacyRandom(1).randint(5, 5); }) == "randint: [5, 5) is not a range of 1 to 2^32 numbers");
}

TEST_CASE("sglang.bench_serving's draws: every prompt length, then every output length, then the gaps, the first at 0 s") {
  WorkloadSpec w;
  w.client = BenchClient::Sglang;
  w.prompt = parse_length("uniform:1:1000", "p");
  w.output = parse_length("uniform:0:3", "o", output_min(BenchClient::Sglang));
  w.requests = 3;
  w.rate_per_s = 2;
  // np.random.seed(1); randint(1, 1001, size=3); randint(0, 4, size=3); exponential(1/2) twice.
  const std::vector<ServingRequest> r = make_requests(w);
  REQUIRE(r.size() == 3);
  CHECK((r[0].prompt_tokens == 38 && r[1].prompt_tokens == 236 && r[2].prompt_tokens == 909));
  // Outputs 0, 3 and 1: the 0 served as the prefill's one token.
  CHECK((r[0].output_tokens == 1 && r[1].output_tokens == 3 && r[2].output_tokens == 1));
  CHECK(r[0].arrival_s == 0);
  CHECK(r[1].arrival_s == Approx(0.1800063774269595).epsilon(1e-15));
  CHECK(r[2].arrival_s == Approx(0.1800063774269595 + 0.07935479759733695).epsilon(1e-15));
  // Fixed lengths draw nothing (randint(N, N + 1)): the gaps are the stream's first draws.
  w.prompt = w.output = parse_length("1024", "p");
  w.rate_per_s = 4;
  NumpyLegacyRandom g(1);
  const double first_gap = g.exponential(0.25);
  CHECK(make_requests(w)[1].arrival_s == first_gap);
  CHECK(make_requests(w)[2].prompt_tokens == 1024);
}

TEST_CASE("sglang.bench_serving's draws: what its client cannot draw is refused, naming the option") {
  WorkloadSpec w;
  w.client = BenchClient::Sglang;
  w.prompt = parse_length("normal:512:64", "p");
  w.output = parse_length("128", "o");
  CHECK(bad_input([&] { make_requests(w); }) ==
        "--bench-client sglang: sglang.bench_serving's random dataset draws uniform lengths; give N or uniform:MIN:MAX, "
        "not normal:MEAN:STD");
  w.prompt = parse_length("512", "p");
  w.seed = 4294967296ULL;
  CHECK(bad_input([&] { make_requests(w); }) ==
        "--seed: 4294967296 is past numpy's seeds (0 to 4294967295), which sglang.bench_serving's --seed takes");
  CHECK(bad_input([] { parse_length("uniform:0:1000", "--output-tokens"); }) ==
        "--output-tokens: 'uniform:0:1000' needs whole MIN and MAX with 1 <= MIN <= MAX <= 10,000,000; give a token "
        "count (512), uniform:MIN:MAX or normal:MEAN:STD");
  CHECK(bad_input([] { parse_length("uniform:0:0", "--output-tokens", 0); }) ==
        "--output-tokens: 'uniform:0:0' needs whole MIN and MAX with 0 <= MIN <= MAX <= 10,000,000 and MAX >= 1; give a "
        "token count (512), uniform:MIN:MAX or normal:MEAN:STD");
  CHECK(bad_input([] { parse_bench_client("vllm", "--bench-client"); }) ==
        "--bench-client: 'vllm' is not one; use pipewright (its own draws) or sglang (sglang.bench_serving's)");
}
