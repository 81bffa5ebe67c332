// calibration.json: every field survives a round trip; other formats, versions and bad fields are named.
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "../error_text.hpp"
#include "calibrate/calibration.hpp"

namespace {

pw::FitQuality quality(int points, double r2) { return pw::FitQuality{points, r2, 1.25, 3.5}; }

pw::Calibration full() {
  pw::Calibration c;
  c.tool = "pipewright test calibrate";
  c.machine = {"cpu", "Test CPU @ 3 GHz", 16, 1};
  c.profile_path = "profile.json";
  c.profile_tool = "pipewright 0.1.0 profiler (cpu)";
  c.runs.push_back({"r1.json", "t1.json", "tiny-llama", "1f1b", 2, 1, 8, 2, 32, 0.0125, false});
  c.runs.push_back({"r2.json", "", "tiny-llama", "interleaved", 2, 2, 4, 1, 32, 0.0071, true});
  c.holdout_fraction = 0.25;
  c.analytic_gpu = "H100-SXM";
  pw::LayerFit f;
  f.kind = "block";
  f.phase = pw::Phase::BackwardInput;
  f.overhead_s = 1.5e-5;
  f.s_per_flop = 1.0 / 3e9;
  f.s_per_byte = 0;
  f.quality = quality(4, 0.9987);
  f.residuals = {{"b=1 s=32", 0.001, 0.00101}, {"b=2 s=32", 0.002, 0.00199}};
  c.layers.push_back(f);
  f.kind = "head";
  f.phase = pw::Phase::Forward;
  f.quality = quality(2, std::nan(""));  // R^2 undefined: written as null
  c.layers.push_back(f);
  c.measured.push_back({"block", "hidden=64 heads=4 kv_heads=2 head_dim=16 ffn=172 mlp=swiglu norm=rmsnorm bias=none "
                        "positions=rotary", 2, 32, 0.001, 0.002, 0.0015, 0.0002});
  c.measured.push_back({"head", "hidden=64 vocab=256 norm=rmsnorm", 1, 32, 0.0003, 0.0004, 0.0002, std::nullopt});
  c.optimizer_s_per_parameter = 2.5e-9;
  pw::LinkFit l;
  l.latency_s = 2e-5;
  l.bandwidth_bytes_per_s = 3.5e9;
  l.quality = quality(9, 0.99);
  l.residuals = {{"1.02 kB", 2.1e-5, 2.03e-5}};
  c.link = l;
  l.src = 0;
  l.dst = 1;
  c.link_pairs.push_back(l);
  c.collectives.push_back({pw::CollectiveKind::ReduceScatter, 0.82, quality(3, 0.97), {{"4 ranks 16.8 MB", 0.01, 0.0101}}});
  c.overheads = {true, 1.07, 1.2e-5, 3e-5, 0.05, quality(8, 0.995), quality(3, 0.9), {{"r1.json", 0.0125, 0.0124}}};
  c.held_out_layers.push_back({"block forward b=8 s=32", 0.004, 1e-6, std::nan(""), 0.0041});
  c.held_out_runs.push_back({"r2.json", 0.0071, 3e-5, 0.0065, 0.007});
  c.warnings = {"p.json: something to know"};
  return c;
}

}  // namespace

TEST_CASE("calibration.json round trip keeps every field") {
  const pw::Calibration c = full();
  const std::string text = pw::calibration_to_json_text(c);
  const pw::Calibration back = pw::calibration_from_json_text(text, "c.json");
  CHECK(pw::calibration_to_json_text(back) == text);
  CHECK(back.layers[0].s_per_flop == c.layers[0].s_per_flop);  // exact: doubles are written to round trip
  CHECK(std::isnan(back.layers[1].quality.r2));
  CHECK(back.measured[0].selective_recompute_s == 0.0002);
  CHECK(!back.measured[1].selective_recompute_s);
  CHECK(back.overheads.transfer_slowdown == 0.05);
  CHECK(back.runs[1].held_out);
  CHECK(std::isnan(back.held_out_layers[0].profiled_s));
  CHECK(back.layer_fit("head", pw::Phase::Forward) == &back.layers[1]);
  CHECK(back.layer_fit("head", pw::Phase::BackwardWeight) == nullptr);
  // What people read: the format, the model and the rates beside their coefficients.
  const nlohmann::json j = nlohmann::json::parse(text);
  CHECK(j["format"] == "pipewright-calibration");
  CHECK(j["version"] == 1);
  CHECK(j["layers"]["fits"][0]["flops_per_s"].get<double>() == Approx(3e9));
  CHECK(j["layers"]["fits"][0]["bytes_per_s"].is_null());
  CHECK(j["layers"]["fits"][1]["quality"]["r2"].is_null());
}

TEST_CASE("calibration.json: another format, a newer version, bad fields") {
  CHECK(bad_input([] { pw::calibration_from_json_text(R"({"format": "pipewright-profile", "version": 1})", "c.json"); }) ==
        "c.json: format is \"pipewright-profile\"; a calibration says \"pipewright-calibration\" (write one with "
        "pipewright calibrate --out)");
  CHECK(bad_input([] { pw::calibration_from_json_text(R"({"format": "pipewright-calibration", "version": 2})", "c.json"); }) ==
        "c.json: version is 2; this pipewright reads version 1");
  CHECK(bad_input([] { pw::calibration_from_json_text("{\"format\": ", "c.json"); }) ==
        "c.json: malformed JSON at byte 12: syntax error while parsing value - unexpected end of input; expected '[', "
        "'{', or a literal");
  std::string text = pw::calibration_to_json_text(full());
  const std::string scale = "\"compute_scale\": 1.07";
  REQUIRE(text.find(scale) != std::string::npos);
  std::string negative = text;
  negative.replace(negative.find(scale), scale.size(), "\"compute_scale\": 0");
  CHECK(bad_input([&] { pw::calibration_from_json_text(negative, "c.json"); }) ==
        "c.json: run_overheads.compute_scale must be positive, got 0");
  std::string phase = text;
  phase.replace(phase.find("\"backward_input\""), 16, "\"backward\"");
  CHECK(bad_input([&] { pw::calibration_from_json_text(phase, "c.json"); }) ==
        "c.json: layers.fits[0].phase is \"backward\"; give \"forward\", \"backward_input\" or \"backward_weight\"");
  std::string exponent = text;
  const std::string one = "\"flop_exponent\": 1.0";
  REQUIRE(exponent.find(one) != std::string::npos);
  exponent.replace(exponent.find(one), one.size(), "\"flop_exponent\": 0.4");
  CHECK(bad_input([&] { pw::calibration_from_json_text(exponent, "c.json"); }) ==
        "c.json: layers.fits[0].flop_exponent is 0.4; it is between 0.5 and 1.5");
  std::string form = text;
  const std::string form_key = "\"form\": \"";
  REQUIRE(form.find(form_key) != std::string::npos);
  form.insert(form.find(form_key) + form_key.size(), "cubic ");
  const std::string cubic = form.substr(form.find(form_key) + form_key.size(), form.find('"', form.find(form_key) + form_key.size()) - form.find(form_key) - form_key.size());
  CHECK(bad_input([&] { pw::calibration_from_json_text(form, "c.json"); }) ==
        "c.json: layers.fits[0].form is '" + cubic +
            "'; it is one of 'overhead', 'rate', 'bandwidth', 'overhead + rate', 'overhead + bandwidth', 'rate^e', "
            "'overhead + rate + bytes', 'overhead + rate^e'");
}

TEST_CASE("calibration.json: entry counts and fitted figures are capped") {
  const std::string text = pw::calibration_to_json_text(full());
  const std::string runs = "\"runs\": [";
  REQUIRE(text.find(runs) != std::string::npos);
  std::string many = text;
  std::string zeros = "0";
  for (int i = 0; i < 100'000; ++i) zeros += ",0";
  many.insert(many.find(runs) + runs.size(), zeros + ",");
  CHECK(bad_input([&] { pw::calibration_from_json_text(many, "c.json"); }) ==
        "c.json: fitted_on.runs has 100003 entries, above the cap of 100000; give at most 100000");
  const std::string scale = "\"compute_scale\": 1.07";
  std::string huge = text;
  huge.replace(huge.find(scale), scale.size(), "\"compute_scale\": 1e300");
  CHECK(bad_input([&] { pw::calibration_from_json_text(huge, "c.json"); }) ==
        "c.json: run_overheads.compute_scale is 1e+300 x; give a figure from 0 to 1000000 x");
}
