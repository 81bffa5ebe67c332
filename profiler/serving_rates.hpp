#pragma once
// A device's serving speed measured rather than assumed: per kind of layer, its time in one serving iteration
// as a fixed cost per call plus a time per unit of each part of its ServingWork (core/serving_work.hpp),
// fitted by non-negative least squares to the layer timed over a grid of batches
// (profiler/cpu_serving_profile.hpp). The analytic roofline takes the larger of compute and memory; on a
// device whose small kernels are overhead-bound (a CPU on a tiny model) the terms add, and the fit says by
// how much.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/json_text.hpp"
#include "core/serving_work.hpp"

namespace pw {

// One timed layer: its kind ("embedding", "block", "moe-block", "head"), the batch it served, the work that
// batch is, and its time (the median over the profile's turns of each turn's mean).
struct ServingSample {
  std::string kind;
  long prefill_tokens = 0, decode_tokens = 0;
  double context = 0;  // the decodes' contexts together
  ServingWork work;
  double time_s = 0;
};

struct ServingRates {
  double call_s = 0;  // per layer and iteration
  double s_per_weight_byte = 0;
  double s_per_gemm_flop = 0;
  double s_per_attention_flop = 0;
  double s_per_kv_byte = 0;
  double s_per_elementwise_byte = 0;
  double s_per_sequence = 0;  // per sequence the attention walks
};

struct ServingKindRates {
  std::string kind;
  std::string shape;  // layer_shape of the layer measured
  ServingRates rates;
};

// What a profile keeps of serving: the rates of each kind of layer and the samples they were fitted to.
struct ServingProfile {
  std::vector<ServingKindRates> kinds;
  std::vector<ServingSample> samples;
};

// The rates' time for `work` (its collectives not included: the profile is of one device).
double serving_rates_time(const ServingRates& rates, const ServingWork& work);

// The non-negative fit minimising the samples' relative errors (each weighted by 1 / time, so a 20 us decode
// counts as much as a 2 ms prefill). BadInput with fewer samples than rates.
ServingRates fit_serving_rates(const std::vector<ServingSample>& samples);

// The largest |fitted - measured| / measured over the samples.
double worst_relative_error(const ServingRates& rates, const std::vector<ServingSample>& samples);

// {"kinds": [{"kind", "shape", "rates": {"call_s", "s_per_weight_byte", ...}}], "samples": [{"kind",
// "prefill_tokens", "decode_tokens", "context", "weight_bytes", "gemm_flops", "attention_flops", "kv_bytes",
// "elementwise_bytes", "attention_sequences", "time_s"}]} (docs/profile-format.md).
nlohmann::ordered_json serving_profile_json(const ServingProfile& profile);
// BadInput naming the field for anything malformed.
ServingProfile serving_profile_from_json(const JsonFields& fields);

}  // namespace pw
