// Serving rates (profiler/serving_rates.hpp): the fit recovers the rates that made its samples, a profile keeps
// them through its JSON, the profiled model answers serving by the layer's kind at tp 1 and hands tp > 1 down;
// the CPU serving profile (profiler/cpu_serving_profile.hpp) times the batches it is given.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/model.hpp"
#include "profiler/cpu_serving_profile.hpp"
#include "profiler/profile.hpp"
#include "profiler/profiled_cost_model.hpp"
#include "../error_text.hpp"
#include "../executor/executor_test_util.hpp"

using namespace pw;

namespace {

ServingRates known_rates() {
  ServingRates r;
  r.call_s = 3e-6;
  r.s_per_gemm_flop = 2e-10;
  r.s_per_attention_flop = 5e-10;
  r.s_per_kv_byte = 1e-10;
  r.s_per_sequence = 4e-7;
  return r;
}

// The block's samples over decodes and prefills, timed exactly by `rates`.
std::vector<ServingSample> exact_samples(const Model& m, const ServingRates& rates) {
  std::vector<ServingSample> out;
  for (long d : {1L, 3L, 8L, 20L})
    for (long ctx : {10L, 100L, 400L}) {
      ServingStep step;
      for (long i = 0; i < d; ++i) step.push_back({i, ctx - 1 + i, 1, true});
      if (ctx == 100) step.push_back({d, 0, 16 * d, true});
      ServingSample s;
      s.kind = "block";
      s.work = serving_layer_work(m, m.layers[1], 1, serving_batch(step));
      s.time_s = serving_rates_time(rates, s.work);
      out.push_back(s);
    }
  return out;
}

}  // namespace

TEST_CASE("a step's batch: one-token sampling chunks after cached positions decode, the rest prefill") {
  const ServingBatch b = serving_batch({{0, 9, 1, true}, {1, 4, 3, false}, {2, 0, 5, true}});
  CHECK(b.decode_tokens == 1);
  CHECK(b.decode_context == 10);
  CHECK(b.prefill_tokens == 8);
  CHECK(b.prefill_sequences == 2);
  CHECK(b.prefill_pairs == 3 * 4 + 3 * 4 / 2.0 + 5 * 6 / 2.0);
  CHECK(b.prefill_kv_reads == 7 + 5);
  CHECK(b.sampled_tokens == 2);
  CHECK(b.sequences() == 3);
}

TEST_CASE("the serving fit recovers the rates its samples were timed with") {
  const Model m = test::tiny_llama(2);
  const ServingRates truth = known_rates();
  const std::vector<ServingSample> samples = exact_samples(m, truth);
  const ServingRates fit = fit_serving_rates(samples);
  CHECK(worst_relative_error(fit, samples) < 1e-9);
  CHECK(fit.call_s == Approx(truth.call_s).epsilon(1e-6));
  CHECK(fit.s_per_sequence == Approx(truth.s_per_sequence).epsilon(1e-6));
  CHECK(bad_input([&] { fit_serving_rates({samples.begin(), samples.begin() + 3}); }) ==
        "serving profile: 3 timed batches cannot fit 7 rates; time at least 7");
}

TEST_CASE("a profile keeps its serving rates through JSON, and the profiled model answers serving by kind at tp 1") {
  const Model m = test::tiny_llama(2);
  Profile p;
  p.serving = ServingProfile{};
  p.serving->kinds.push_back({"block", layer_shape(*m.transformer, LayerKind::Block), known_rates()});
  p.serving->samples = exact_samples(m, known_rates());
  const Profile back = profile_from_json_text(profile_to_json_text(p), "p.json");
  REQUIRE(back.serving);
  REQUIRE(back.serving->kinds.size() == 1);
  CHECK(back.serving->kinds[0].rates.s_per_attention_flop == known_rates().s_per_attention_flop);
  CHECK(back.serving->samples.size() == p.serving->samples.size());
  CHECK(back.serving->samples[5].work.attention_sequences == p.serving->samples[5].work.attention_sequences);
  CHECK(profile_to_json_text(back) == profile_to_json_text(p));

  const AnalyticCostModel analytic;
  const ProfiledCostModel cost(back, m, analytic);
  const GpuSpec gpu{"g", 1e15, 80e9, 3e12};
  const LinkSpec link{1e11, 1e-6};
  const ServingWork w = serving_layer_work(m, m.layers[1], 1, serving_batch({{0, 0, 32, true}}));
  CHECK(cost.serving_time(m.layers[1], w, gpu, link, 1) == serving_rates_time(known_rates(), w));
  // No rates for the head, and none for tp 2: the model below answers.
  const ServingWork head = serving_layer_work(m, m.layers.back(), 1, serving_batch({{0, 0, 32, true}}));
  CHECK(cost.serving_time(m.layers.back(), head, gpu, link, 1) == analytic.serving_time(m.layers.back(), head, gpu, link, 1));
  const ServingWork w2 = serving_layer_work(m, m.layers[1], 2, serving_batch({{0, 0, 32, true}}));
  CHECK(cost.serving_time(m.layers[1], w2, gpu, link, 2) == analytic.serving_time(m.layers[1], w2, gpu, link, 2));

  nlohmann::json bad = nlohmann::json::parse(profile_to_json_text(p));
  bad["serving"]["kinds"][0]["rates"]["s_per_sequence"] = -1;
  CHECK(bad_input([&] { profile_from_json_text(bad.dump(), "p.json"); }).find("serving.kinds[0].rates.s_per_sequence") !=
        std::string::npos);
}

TEST_CASE("the cpu serving profile times each kind of layer over the batches given, a turn's run after each turn") {
  const Model m = test::tiny_llama(3);
  ServingProfileRequest r = quick_serving_request(sample_steps({{{0, 0, 6, true}}, {{0, 6, 1, true}, {1, 3, 1, true}},
                                                                {{0, 7, 1, true}}, {{0, 0, 2, false}, {1, 4, 1, true}},
                                                                {{0, 2, 3, true}}, {{2, 0, 4, true}}, {{0, 1, 1, true}}},
                                                               7),
                                                  1);
  r.options.min_time_s = 0.001;
  r.options.rounds = 3;
  int turns = 0;
  r.after_round = [&] { ++turns; };
  const ServingProfile p = profile_cpu_serving(m, r);
  CHECK(turns == 3);
  CHECK(p.samples.size() == 3 * 7);  // embedding, block, head
  REQUIRE(p.kinds.size() == 3);
  CHECK(p.kinds[1].kind == "block");
  for (const ServingSample& s : p.samples) CHECK(s.time_s > 0);
  CHECK(sample_steps({{{0, 0, 1, true}}, {{1, 0, 1, true}}, {{2, 0, 1, true}}, {{3, 0, 1, true}}}, 2) ==
        std::vector<ServingStep>{{{0, 0, 1, true}}, {{3, 0, 1, true}}});
}
