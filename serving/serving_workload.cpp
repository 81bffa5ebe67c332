#include "serving/serving_workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "serving/numpy_legacy_random.hpp"

namespace pw {
namespace {

// The longest prompt or output length taken (far past any model's context).
constexpr double kMaxLength = 1e7;

double parse_number(const std::string& text, const std::string& option, const std::string& whole) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw_bad_input("{}: '{}' is not a length; give a token count (512), uniform:MIN:MAX or normal:MEAN:STD", option, whole);
}

// [0, 1) from the generator's top 53 bits: the same on every platform.
double unit(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

long draw(const LengthSpec& s, std::mt19937_64& g) {
  switch (s.kind) {
    case LengthSpec::Kind::Fixed: return static_cast<long>(s.a);
    case LengthSpec::Kind::Uniform: return static_cast<long>(s.a + std::floor(unit(g) * (s.b - s.a + 1)));
    case LengthSpec::Kind::Normal: {
      // Box-Muller on two draws.
      const double u1 = 1 - unit(g), u2 = unit(g);
      const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
      return std::max(1L, std::lround(s.a + s.b * z));
    }
  }
  return 1;
}

}  // namespace

LengthSpec parse_length(const std::string& text, const std::string& option, long uniform_min) {
  LengthSpec s;
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
  auto bad_range = [&](const std::string& why) {
    throw_bad_input("{}: '{}' {}; give a token count (512), uniform:MIN:MAX or normal:MEAN:STD", option, text, why);
  };
  if (parts.size() == 1) {
    s.a = s.b = parse_number(parts[0], option, text);
    if (s.a < 1 || s.a != std::floor(s.a) || s.a > kMaxLength) bad_range("is not a whole number of tokens from 1 to 10,000,000");
    return s;
  }
  if (parts.size() != 3 || (parts[0] != "uniform" && parts[0] != "normal")) bad_range("is not a length");
  s.kind = parts[0] == "uniform" ? LengthSpec::Kind::Uniform : LengthSpec::Kind::Normal;
  s.a = parse_number(parts[1], option, text);
  s.b = parse_number(parts[2], option, text);
  if (s.kind == LengthSpec::Kind::Uniform &&
      (s.a < static_cast<double>(uniform_min) || s.b < std::max(s.a, 1.0) || s.a != std::floor(s.a) ||
       s.b != std::floor(s.b) || s.b > kMaxLength))
    bad_range(fmt::format("needs whole MIN and MAX with {} <= MIN <= MAX <= 10,000,000{}", uniform_min,
                          uniform_min > 0 ? "" : " and MAX >= 1"));
  if (s.kind == LengthSpec::Kind::Normal && (s.a < 1 || s.b < 0 || s.a + 6 * s.b > kMaxLength))
    bad_range("needs MEAN >= 1, STD >= 0 and MEAN + 6 STD <= 10,000,000");
  return s;
}

namespace {

std::vector<ServingRequest> pipewright_draws(const WorkloadSpec& spec) {
  std::mt19937_64 g(spec.seed);
  std::vector<ServingRequest> out;
  double t = 0;
  for (long i = 0; i < spec.requests; ++i) {
    ServingRequest r;
    if (spec.rate_per_s > 0) {
      t += -std::log(1 - unit(g)) / spec.rate_per_s;
      r.arrival_s = t;
    }
    if (spec.lengths.empty()) {
      r.prompt_tokens = draw(spec.prompt, g);
      r.output_tokens = draw(spec.output, g);
    }
    out.push_back(r);
  }
  return out;
}

// sglang.bench_serving (0.4 to 0.5): sample_random_requests (benchmark/datasets in later versions) draws
// input_lens = np.random.randint(MIN, MAX + 1, size=n), then output_lens likewise; get_request yields a request,
// then sleeps np.random.exponential(1.0 / request_rate) before the next.
std::vector<ServingRequest> sglang_draws(const WorkloadSpec& spec) {
  if (spec.seed > 0xFFFFFFFFULL)
    throw_bad_input("--seed: {} is past numpy's seeds (0 to 4294967295), which sglang.bench_serving's --seed takes",
                    spec.seed);
  for (const LengthSpec* s : {&spec.prompt, &spec.output})
    if (spec.lengths.empty() && s->kind == LengthSpec::Kind::Normal)
      throw_bad_input("--bench-client sglang: sglang.bench_serving's random dataset draws uniform lengths; give N or "
                      "uniform:MIN:MAX, not normal:MEAN:STD");
  NumpyLegacyRandom g(static_cast<std::uint32_t>(spec.seed));
  std::vector<ServingRequest> out(static_cast<size_t>(spec.requests));
  const auto draw_all = [&](const LengthSpec& s, long ServingRequest::*field) {
    for (ServingRequest& r : out)
      r.*field = std::max<long>(1, g.randint(static_cast<std::int64_t>(s.a), static_cast<std::int64_t>(s.b) + 1));
  };
  if (spec.lengths.empty()) {
    draw_all(spec.prompt, &ServingRequest::prompt_tokens);
    draw_all(spec.output, &ServingRequest::output_tokens);
  }
  if (spec.rate_per_s > 0)
    for (size_t i = 1; i < out.size(); ++i) out[i].arrival_s = out[i - 1].arrival_s + g.exponential(1.0 / spec.rate_per_s);
  return out;
}

}  // namespace

BenchClient parse_bench_client(const std::string& text, const std::string& option) {
  if (text == "pipewright") return BenchClient::Pipewright;
  if (text == "sglang") return BenchClient::Sglang;
  throw_bad_input("{}: '{}' is not one; use pipewright (its own draws) or sglang (sglang.bench_serving's)", option, text);
}

std::vector<ServingRequest> make_requests(const WorkloadSpec& spec) {
  std::vector<ServingRequest> out = spec.client == BenchClient::Sglang ? sglang_draws(spec) : pipewright_draws(spec);
  if (!spec.lengths.empty())
    for (size_t i = 0; i < out.size(); ++i) {
      const ServingRequest& l = spec.lengths[i % spec.lengths.size()];
      out[i].prompt_tokens = l.prompt_tokens;
      out[i].output_tokens = l.output_tokens;
    }
  return out;
}

namespace {

std::vector<ServingRequest> read_jsonl(const std::string& text, const std::string& source, long max_requests, bool arrivals) {
  std::vector<ServingRequest> out;
  std::stringstream in(text);
  long line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (static_cast<long>(out.size()) >= max_requests)
      throw_bad_input("{}: more than {} requests; split the trace or raise --requests", source, max_requests);
    const std::string where = fmt::format("{} line {}", source, line_no);
    const nlohmann::json j = parse_json_text(line, where);
    const std::string fields = arrivals ? R"({"prompt_tokens", "output_tokens", "arrival_s"})" : R"({"prompt_tokens", "output_tokens"})";
    if (!j.is_object()) throw_bad_input("{}: not a JSON object; give {}", where, fields);
    const JsonFields f(j, where);
    if (arrivals)
      f.reject_unknown({"prompt_tokens", "output_tokens", "arrival_s"});
    else if (j.contains("arrival_s"))
      throw_bad_input("{}: arrival_s: a lengths file replays lengths, --rate or --concurrency give the arrivals; "
                      "use --trace for a file with arrival times",
                      where);
    else
      f.reject_unknown({"prompt_tokens", "output_tokens"});
    ServingRequest r;
    r.prompt_tokens = f.positive_integer("prompt_tokens");
    r.output_tokens = f.positive_integer("output_tokens");
    if (arrivals) r.arrival_s = f.non_negative_number("arrival_s", 0.0);
    if (r.arrival_s > kMaxArrivalSeconds)
      throw_bad_input("{}: arrival_s: {:g} s is past the longest run taken, 1e+09 s (about 31 years)", where, r.arrival_s);
    if (r.prompt_tokens > kMaxLength || r.output_tokens > kMaxLength)
      throw_bad_input("{}: a length over 10,000,000 tokens; no model serves that", where);
    out.push_back(r);
  }
  if (out.empty()) throw_bad_input("{}: no requests; give one JSON object per line", source);
  return out;
}

}  // namespace

std::vector<ServingRequest> requests_from_jsonl(const std::string& text, const std::string& source, long max_requests) {
  return read_jsonl(text, source, max_requests, true);
}

std::vector<ServingRequest> lengths_from_jsonl(const std::string& text, const std::string& source, long max_requests) {
  return read_jsonl(text, source, max_requests, false);
}

}  // namespace pw
