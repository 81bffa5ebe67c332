#include "profiler/serving_rates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.hpp"
#include "core/file_caps.hpp"
#include "profiler/nnls.hpp"

namespace pw {
namespace {

constexpr int kRates = 7;

// Typical rates in the order of ServingRates' fields, the call first: the solver finds each rate as a multiple
// of its typical value, so that its unknowns are all about 1.
constexpr double kScale[kRates] = {1e-5, 1e-10, 1e-10, 1e-10, 1e-10, 1e-10, 1e-6};

// The work's amounts in the order of kFields, the call first (no allocation: the simulator asks per layer and batch).
std::array<double, kRates> amounts(const ServingWork& w) {
  // A device profiled without fp8 GEMMs (the CPU) times them as the others.
  return {1.0,        w.weight_bytes,      w.gemm_flops + w.fp8_gemm_flops, w.attention_flops,
          w.kv_bytes, w.elementwise_bytes, w.attention_sequences};
}

constexpr double ServingRates::*kFields[kRates] = {
    &ServingRates::call_s,        &ServingRates::s_per_weight_byte,      &ServingRates::s_per_gemm_flop,
    &ServingRates::s_per_attention_flop, &ServingRates::s_per_kv_byte, &ServingRates::s_per_elementwise_byte,
    &ServingRates::s_per_sequence};

const char* const kRateNames[kRates] = {"call_s",        "s_per_weight_byte",      "s_per_gemm_flop", "s_per_attention_flop",
                                        "s_per_kv_byte", "s_per_elementwise_byte", "s_per_sequence"};

constexpr FigureRange kFlopRange{0, 1e24, "FLOP"};
constexpr FigureRange kCountRange{0, 1e15, "tokens"};

}  // namespace

double serving_rates_time(const ServingRates& r, const ServingWork& w) {
  const std::array<double, kRates> a = amounts(w);
  double t = 0;
  for (int j = 0; j < kRates; ++j) t += r.*kFields[j] * a[static_cast<size_t>(j)];
  return t;
}

ServingRates fit_serving_rates(const std::vector<ServingSample>& samples) {
  if (samples.size() < static_cast<size_t>(kRates))
    throw_bad_input("serving profile: {} timed batches cannot fit {} rates; time at least {}", samples.size(), kRates,
                    kRates);
  Eigen::MatrixXd A(static_cast<Eigen::Index>(samples.size()), kRates);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    const ServingSample& s = samples[i];
    if (!(s.time_s > 0)) throw_bad_input("serving profile: sample {} has time {} s; times must be positive", i, s.time_s);
    const std::array<double, kRates> a = amounts(s.work);
    for (int j = 0; j < kRates; ++j)
      A(static_cast<Eigen::Index>(i), j) = a[static_cast<size_t>(j)] * kScale[j] / s.time_s;
  }
  const Eigen::VectorXd x = nnls(A, b).x;
  ServingRates rates;
  for (int j = 0; j < kRates; ++j) rates.*kFields[j] = x(j) * kScale[j];
  return rates;
}

double worst_relative_error(const ServingRates& rates, const std::vector<ServingSample>& samples) {
  double worst = 0;
  for (const ServingSample& s : samples)
    worst = std::max(worst, std::abs(serving_rates_time(rates, s.work) - s.time_s) / s.time_s);
  return worst;
}

nlohmann::ordered_json serving_profile_json(const ServingProfile& p) {
  nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
  for (const ServingKindRates& k : p.kinds) {
    nlohmann::ordered_json rates;
    for (int j = 0; j < kRates; ++j) rates[kRateNames[j]] = k.rates.*kFields[j];
    kinds.push_back({{"kind", k.kind}, {"shape", k.shape}, {"rates", rates}});
  }
  nlohmann::ordered_json samples = nlohmann::ordered_json::array();
  for (const ServingSample& s : p.samples)
    samples.push_back({{"kind", s.kind},
                       {"prefill_tokens", s.prefill_tokens},
                       {"decode_tokens", s.decode_tokens},
                       {"context", s.context},
                       {"weight_bytes", s.work.weight_bytes},
                       {"gemm_flops", s.work.gemm_flops},
                       {"attention_flops", s.work.attention_flops},
                       {"kv_bytes", s.work.kv_bytes},
                       {"elementwise_bytes", s.work.elementwise_bytes},
                       {"attention_sequences", s.work.attention_sequences},
                       {"time_s", s.time_s}});
  return {{"kinds", kinds}, {"samples", samples}};
}

ServingProfile serving_profile_from_json(const JsonFields& f) {
  f.reject_unknown({"kinds", "samples"});
  ServingProfile p;
  const nlohmann::json& kinds = f.array("kinds", kMaxProfileEntries, "kinds of layer");
  for (size_t i = 0; i < kinds.size(); ++i) {
    const JsonFields k(kinds[i], f.source(), f.name(fmt::format("kinds[{}].", i)));
    k.reject_unknown({"kind", "shape", "rates"});
    ServingKindRates entry;
    entry.kind = k.string("kind");
    entry.shape = k.string("shape");
    const JsonFields r = k.object("rates");
    r.reject_unknown({"call_s", "s_per_weight_byte", "s_per_gemm_flop", "s_per_attention_flop", "s_per_kv_byte",
                      "s_per_elementwise_byte", "s_per_sequence"});
    for (int j = 0; j < kRates; ++j)
      entry.rates.*kFields[j] = r.figure(kRateNames[j], j == 0 ? kSecondsRange : kSecondsPerUnitRange);
    p.kinds.push_back(entry);
  }
  if (!f.has("samples")) return p;
  const nlohmann::json& samples = f.array("samples", kMaxProfileEntries, "timed serving batches");
  for (size_t i = 0; i < samples.size(); ++i) {
    const JsonFields e(samples[i], f.source(), f.name(fmt::format("samples[{}].", i)));
    e.reject_unknown({"kind", "prefill_tokens", "decode_tokens", "context", "weight_bytes", "gemm_flops",
                      "attention_flops", "kv_bytes", "elementwise_bytes", "attention_sequences", "time_s"});
    ServingSample s;
    s.kind = e.string("kind");
    s.prefill_tokens = e.non_negative_integer("prefill_tokens");
    s.decode_tokens = e.non_negative_integer("decode_tokens");
    s.context = e.figure("context", kCountRange);
    s.work.weight_bytes = e.figure("weight_bytes", kBytesRange);
    s.work.gemm_flops = e.figure("gemm_flops", kFlopRange);
    s.work.attention_flops = e.figure("attention_flops", kFlopRange);
    s.work.kv_bytes = e.figure("kv_bytes", kBytesRange);
    s.work.elementwise_bytes = e.figure("elementwise_bytes", kBytesRange);
    s.work.attention_sequences = e.figure("attention_sequences", kCountRange);
    s.time_s = e.positive_figure("time_s", kSecondsRange);
    p.samples.push_back(s);
  }
  return p;
}

}  // namespace pw
