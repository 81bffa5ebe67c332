// Serving workloads (serving/serving_workload.hpp) and metrics (serving/serving_metrics.hpp).
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.hpp"
#include "serving/serving_metrics.hpp"
#include "serving/serving_workload.hpp"

using namespace pw;

namespace {

std::string bad(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("lengths: fixed, uniform and normal, and malformed ones named") {
  CHECK(parse_length("512", "--prompt-tokens").kind == LengthSpec::Kind::Fixed);
  const LengthSpec u = parse_length("uniform:100:200", "--prompt-tokens");
  CHECK((u.kind == LengthSpec::Kind::Uniform && u.a == 100 && u.b == 200));
  const LengthSpec n = parse_length("normal:512:64", "--output-tokens");
  CHECK((n.kind == LengthSpec::Kind::Normal && n.a == 512 && n.b == 64));
  CHECK(bad([] { parse_length("15Q", "--prompt-tokens"); }) ==
        "--prompt-tokens: '15Q' is not a length; give a token count (512), uniform:MIN:MAX or normal:MEAN:STD");
  CHECK(bad([] { parse_length("0", "--prompt-tokens"); }) ==
        "--prompt-tokens: '0' is not a whole number of tokens from 1 to 10,000,000; give a token count (512), "
        "uniform:MIN:MAX or normal:MEAN:STD");
  CHECK(bad([] { parse_length("uniform:9:3", "--output-tokens"); }) ==
        "--output-tokens: 'uniform:9:3' needs whole MIN and MAX with 1 <= MIN <= MAX <= 10,000,000; give a token "
        "count (512), uniform:MIN:MAX or normal:MEAN:STD");
}

TEST_CASE("generated requests: one seed, one workload, lengths in range, Poisson gaps of mean 1 / rate") {
  WorkloadSpec w;
  w.prompt = parse_length("uniform:100:200", "p");
  w.output = parse_length("normal:50:10", "o");
  w.requests = 20000;
  w.rate_per_s = 4;
  w.seed = 7;
  const std::vector<ServingRequest> a = make_requests(w), b = make_requests(w);
  REQUIRE(a.size() == 20000);
  double sum_prompt = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK((a[i].prompt_tokens == b[i].prompt_tokens && a[i].output_tokens == b[i].output_tokens &&
           a[i].arrival_s == b[i].arrival_s));
    CHECK((a[i].prompt_tokens >= 100 && a[i].prompt_tokens <= 200));
    CHECK(a[i].output_tokens >= 1);
    if (i > 0) CHECK(a[i].arrival_s > a[i - 1].arrival_s);
    sum_prompt += static_cast<double>(a[i].prompt_tokens);
  }
  // 20,000 gaps of mean 0.25 s: within 3 standard errors (0.25 / sqrt(20000) each).
  CHECK(std::fabs(a.back().arrival_s / 20000 - 0.25) < 3 * 0.25 / std::sqrt(20000.0));
  CHECK(std::fabs(sum_prompt / 20000 - 150) < 1.5);
  w.seed = 8;
  CHECK(make_requests(w)[0].prompt_tokens * 1000 + make_requests(w)[1].prompt_tokens !=
        a[0].prompt_tokens * 1000 + a[1].prompt_tokens);
}

TEST_CASE("traces: one request per line, fields named in errors") {
  const std::vector<ServingRequest> r = requests_from_jsonl(
      "{\"prompt_tokens\": 10, \"output_tokens\": 3, \"arrival_s\": 0.5}\n\n{\"prompt_tokens\": 7, \"output_tokens\": 1}\n",
      "t.jsonl", 10);
  REQUIRE(r.size() == 2);
  CHECK((r[0].prompt_tokens == 10 && r[0].output_tokens == 3 && r[0].arrival_s == 0.5));
  CHECK(r[1].arrival_s == 0);
  CHECK(bad([] { requests_from_jsonl("{\"prompt_tokens\": 10, \"output_tokens\": 0}\n", "t.jsonl", 10); })
            .rfind("t.jsonl line 1: output_tokens", 0) == 0);
  CHECK(bad([] { requests_from_jsonl("{\"prompt\": 10}\n", "t.jsonl", 10); }).rfind("t.jsonl line 1: ", 0) == 0);
  CHECK(bad([] { requests_from_jsonl("not json\n", "t.jsonl", 10); }).rfind("t.jsonl line 1: malformed JSON", 0) == 0);
  CHECK(bad([] { requests_from_jsonl("", "t.jsonl", 10); }) == "t.jsonl: no requests; give one JSON object per line");
  CHECK(bad([] {
          requests_from_jsonl("{\"prompt_tokens\": 1, \"output_tokens\": 1}\n{\"prompt_tokens\": 1, \"output_tokens\": 1}\n",
                              "t.jsonl", 1);
        }) == "t.jsonl: more than 1 requests; split the trace or raise --requests");
}

TEST_CASE("lengths files: replayed in order and again from the first, arrivals from the rate") {
  const std::vector<ServingRequest> file =
      lengths_from_jsonl("{\"prompt_tokens\": 10, \"output_tokens\": 3}\n{\"prompt_tokens\": 7, \"output_tokens\": 2}\n", "l.jsonl", 10);
  REQUIRE(file.size() == 2);
  WorkloadSpec w;
  w.lengths = file;
  w.requests = 5;
  w.rate_per_s = 4;
  const std::vector<ServingRequest> r = make_requests(w);
  REQUIRE(r.size() == 5);
  for (size_t i = 0; i < r.size(); ++i) {
    CHECK(r[i].prompt_tokens == (i % 2 == 0 ? 10 : 7));
    CHECK(r[i].output_tokens == (i % 2 == 0 ? 3 : 2));
    if (i > 0) CHECK(r[i].arrival_s > r[i - 1].arrival_s);
  }
  // The arrivals are the generated workload's for the same seed and rate: the lengths take no draws.
  WorkloadSpec drawn;
  drawn.requests = 5;
  drawn.rate_per_s = 4;
  drawn.prompt = parse_length("10", "p");
  drawn.output = parse_length("3", "o");
  CHECK(make_requests(drawn)[4].arrival_s == r[4].arrival_s);
  CHECK(bad([] { lengths_from_jsonl("{\"prompt_tokens\": 1, \"output_tokens\": 1, \"arrival_s\": 2}\n", "l.jsonl", 10); }) ==
        "l.jsonl line 1: arrival_s: a lengths file replays lengths, --rate or --concurrency give the arrivals; use --trace "
        "for a file with arrival times");
  CHECK(bad([] { lengths_from_jsonl("{\"prompt_tokens\": 1}\n", "l.jsonl", 10); }) == "l.jsonl line 1: missing required field 'output_tokens'");
}

TEST_CASE("metrics: percentiles as np.percentile takes them, and rates over the run") {
  CHECK(percentile_of({5, 1, 3, 2, 4}, 50) == 3);
  CHECK(percentile_of({5, 1, 3, 2, 4}, 99) == Approx(4.96));
  CHECK(percentile_of({}, 50) == 0);
  ServingResult r;
  r.makespan_s = 10;
  // arrival, first token, last token, prompt tokens, output tokens, preemptions
  r.requests = {{0, 1, 5, 10, 5, 0}, {2, 4, 8, 20, 3, 0}};
  const ServingMetrics m = serving_metrics(r, {90});
  CHECK(m.output_tokens_per_s == 0.8);
  CHECK(m.requests_per_s == 0.2);
  CHECK(m.input_tokens_per_s == 3);
  CHECK(m.total_tokens_per_s == 3.8);
  // Two requests: the median halfway between them, p99 0.99 of the way (np.percentile's default).
  CHECK(m.ttft_p50_s == 1.5);
  CHECK(m.ttft_p99_s == Approx(1.99));
  CHECK(m.tpot_p50_s == 1.5);  // (5 - 1) / 4 and (8 - 4) / 2
  CHECK(m.tpot_p99_s == Approx(1.99));
  CHECK(m.percentiles == std::vector<double>{50, 90, 99});
  CHECK(m.ttft.mean_s == 1.5);
  CHECK(m.ttft.at_s[0] == 1.5);
  CHECK(m.ttft.at_s[1] == Approx(1.9));
  CHECK(m.ttft.at_s[2] == Approx(1.99));
  CHECK(m.tpot.mean_s == 1.5);
  CHECK(m.e2el.mean_s == 5.5);  // 5 - 0 and 8 - 2
  CHECK(m.e2el.at_s[0] == 5.5);
  CHECK(m.e2el.at_s[2] == Approx(5.99));
  nlohmann::ordered_json j;
  add_metrics_json(j, m);
  CHECK(j.at("e2el_p90_s").get<double>() == Approx(5.9));
  CHECK(j.at("tpot_mean_s") == 1.5);
  // One output token each: no TPOT, null in JSON rather than a 0 that reads as instant.
  r.requests = {{0, 1, 1, 10, 1, 0}};
  const ServingMetrics single = serving_metrics(r);
  CHECK(!single.tpot.defined);
  nlohmann::ordered_json k;
  add_metrics_json(k, single);
  CHECK(k.at("tpot_p50_s").is_null());
  CHECK(k.at("tpot_mean_s").is_null());
  CHECK(k.at("ttft_p50_s") == 1);
  CHECK(percentiles_from_string("90,99.9") == std::vector<double>{90, 99.9});
  // ITL over counted gaps: 1 s twice and 3 s once, read as the list 1, 1, 3 (positions 1 and 1.98).
  r.token_gaps = {{1.0, 2}, {3.0, 1}};
  const ServingMetrics itl = serving_metrics(r);
  CHECK(itl.itl.mean_s == Approx(5.0 / 3));
  CHECK(itl.itl.at_s[0] == 1);
  CHECK(itl.itl.at_s[1] == Approx(2.96));
  // Counts standing for 1, 1, 3, 10, 10, 10: np.percentile gives 1, 3, 6.5, 10 and 10 at 10, 40, 50, 90, 99.
  r.token_gaps = {{10.0, 3}, {1.0, 2}, {3.0, 1}};
  const ServingMetrics six = serving_metrics(r, {10, 40, 90});
  CHECK(six.percentiles == std::vector<double>{10, 40, 50, 90, 99});
  CHECK(six.itl.at_s == std::vector<double>{1, 3, 6.5, 10, 10});
  // The same values listed one by one give the same percentiles.
  CHECK(percentile_of({10, 1, 3, 10, 1, 10}, 50) == 6.5);
  CHECK(percentile_of({10, 1, 3, 10, 1, 10}, 40) == 3);
  CHECK(percentile_text(99.9) == "99.9");
}
