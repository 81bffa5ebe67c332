#pragma once
// The requests a serving run sees: prompt and output lengths (fixed, uniform or normal), arriving as a Poisson
// process of a given rate, all at once for a closed loop (the engine keeps a fixed number in flight), or as a
// JSONL trace of {"prompt_tokens", "output_tokens", "arrival_s"}. Lengths and gaps come from a 64-bit Mersenne
// Twister through transforms written here (the standard library's distributions differ between
// implementations), so one seed gives one workload everywhere; or, as a benchmark client draws them, from that
// client's generator in its order, so a simulation sees the very requests the client sends.
#include <cstdint>
#include <string>
#include <vector>

#include "serving/serving_sim.hpp"

namespace pw {

// "512" fixed, "uniform:128:1024" (inclusive), "normal:512:128" (mean, standard deviation; rounded, at least 1).
struct LengthSpec {
  enum class Kind { Fixed, Uniform, Normal } kind = Kind::Fixed;
  double a = 1, b = 1;
};
// BadInput naming `option` for anything else. `uniform_min`: the least MIN of a uniform range (0 for the output
// lengths sglang.bench_serving 0.5.6 and before drew, randint(0, MAX + 1); a 0 drawn is served as the one token
// the prefill gives).
LengthSpec parse_length(const std::string& text, const std::string& option, long uniform_min = 1);

// Whose draws: pipewright's own, or sglang.bench_serving's random dataset (numpy's legacy generator seeded
// with --seed, its default 1: every prompt length as randint(MIN, MAX + 1), then every output length, then, with
// a rate, the first request at 0 s and each next np.random.exponential(1 / rate) after the one before).
enum class BenchClient { Pipewright, Sglang };

struct WorkloadSpec {
  LengthSpec prompt, output;
  // Replayed lengths (a ShareGPT-like file): request i takes lengths[i]'s prompt and output tokens, in the
  // file's order, instead of a draw; empty: drawn from prompt and output.
  std::vector<ServingRequest> lengths;
  long requests = 0;
  double rate_per_s = 0;  // Poisson arrivals; 0: all at time 0 (a closed loop or a batch)
  std::uint64_t seed = 1;
  BenchClient client = BenchClient::Pipewright;
};

// "pipewright" or "sglang"; BadInput naming `option` for anything else.
BenchClient parse_bench_client(const std::string& text, const std::string& option);
// The least MIN of a uniform output length the client draws from: 0 for sglang (its 0.5.6 and earlier), else 1.
inline long output_min(BenchClient c) { return c == BenchClient::Sglang ? 0 : 1; }

// BadInput for what the client cannot draw: normal lengths or a seed numpy refuses (sglang).
std::vector<ServingRequest> make_requests(const WorkloadSpec& spec);

// One request per line: {"prompt_tokens": 812, "output_tokens": 120, "arrival_s": 0.25}; arrivals need not be
// sorted. BadInput naming the line and field, and for a trace of more than `max_requests`.
std::vector<ServingRequest> requests_from_jsonl(const std::string& text, const std::string& source, long max_requests);

// A file of lengths to replay: one {"prompt_tokens", "output_tokens"} object per line (the trace's format
// without arrivals, which --rate or --concurrency give). BadInput naming the line and field.
std::vector<ServingRequest> lengths_from_jsonl(const std::string& text, const std::string& source, long max_requests);

}  // namespace pw
