// The layer fit: shape text read back, parameters recovered from synthetic profiles, degenerate profiles.
#include <catch2/catch.hpp>

#include <cmath>

#include "../error_text.hpp"
#include "calibrate/layer_fit.hpp"
#include "synthetic.hpp"

namespace {

const pw::LayerFit& fit_of(const std::vector<pw::LayerFit>& fits, const std::string& kind, pw::Phase phase) {
  for (const pw::LayerFit& f : fits)
    if (f.kind == kind && f.phase == phase) return f;
  FAIL("no fit for " << kind);
  return fits.front();
}

}  // namespace

TEST_CASE("shape text reads back into the dimensions that wrote it") {
  for (const char* name : {"tiny-llama.json", "tiny-gpt.json"}) {
    const pw::Model m = synth::tiny(name);
    for (pw::LayerKind kind : {pw::LayerKind::Embedding, pw::LayerKind::Block, pw::LayerKind::Head}) {
      const std::string shape = pw::layer_shape(*m.transformer, kind);
      INFO(shape);
      CHECK(pw::layer_shape(pw::config_from_shape(kind, shape, "p.json"), kind) == shape);
    }
  }
  // The work of a profiled block is layer_work()'s for the model's own block at that micro-batch.
  const pw::Model m = synth::tiny("tiny-llama.json");
  pw::Workload w;
  w.micro_batch_size = 4;
  w.seq_len = 16;
  const pw::LayerWork direct = pw::layer_work(m, m.layers[1], w);
  const pw::LayerWork read = pw::profiled_layer_work("block", pw::layer_shape(*m.transformer, pw::LayerKind::Block), 4, 16, "p");
  CHECK(read.forward.flops() == direct.forward.flops());
  CHECK(read.backward_input.memory_bytes == direct.backward_input.memory_bytes);
  CHECK(read.backward_weight.flops() == direct.backward_weight.flops());
}

TEST_CASE("shape text that pipewright profile would not write is rejected") {
  CHECK(bad_input([] { pw::config_from_shape(pw::LayerKind::Block, "hidden=64 heads=4", "p.json: layers[1]"); }) ==
        "p.json: layers[1]: shape 'hidden=64 heads=4' has no positions=; use the shape `pipewright profile` writes");
  CHECK(bad_input([] {
          pw::config_from_shape(pw::LayerKind::Head, "hidden=64 vocab=256 norm=rmsnorm extra", "p.json: layers[2]");
        }) == "p.json: layers[2]: shape 'hidden=64 vocab=256 norm=rmsnorm extra' has 'extra', which is not key=value; use "
              "the shape `pipewright profile` writes");
  CHECK(bad_input([] { pw::config_from_shape(pw::LayerKind::Head, "hidden=64 vocab=256 norm=batchnorm", "p.json"); }) ==
        "p.json: shape 'hidden=64 vocab=256 norm=batchnorm' is not one `pipewright profile` writes (read back as "
        "'hidden=64 vocab=256 norm=layernorm'); profile the model again");
  CHECK(bad_input([] { pw::config_from_shape(pw::LayerKind::Embedding, "hidden=0 vocab=256 positions=rotary", "p.json"); }) ==
        "p.json: shape 'hidden=0 vocab=256 positions=rotary' has hidden=0; it must be a positive whole number");
}

TEST_CASE("the layer fit recovers known parameters from noisy synthetic profiles") {
  // Micro-batch sizes 1..8 at three sequence lengths and two widths (hidden 64 and 128): FLOPs grow as
  // h^2 and s^2 where bytes grow mostly as h and s, so the two are not collinear and every coefficient is
  // identifiable. With +-1% noise (worst over 29 seeds: FLOPs 1.1%, bytes 4.9%, overhead 28%) the block's
  // time per FLOP comes back within 3%, per byte within 10%, its overhead (1-3% of a block's time, so
  // mostly noise) within 40%, and every fitted time within 2% of its measurement.
  const pw::Model m = synth::tiny("tiny-llama.json");
  pw::TransformerConfig c = *m.transformer;
  c.hidden = 128;
  c.heads = 8;
  c.kv_heads = 4;
  c.ffn = 344;
  const pw::Model wide = pw::make_transformer_model("wide", c);
  const synth::Truth t;
  pw::Profile p = synth::profile(m, {1, 2, 4, 8}, {16, 32, 64}, t, 0.01, 7);
  const pw::Profile q = synth::profile(wide, {1, 2, 4, 8}, {16, 32, 64}, t, 0.01, 107);
  p.layers.insert(p.layers.end(), q.layers.begin(), q.layers.end());
  std::vector<std::string> warnings;
  const std::vector<pw::LayerFit> fits = pw::fit_layers(p.layers, "p.json", warnings);
  CHECK(warnings.empty());
  REQUIRE(fits.size() == 9);
  for (pw::Phase phase : {pw::Phase::Forward, pw::Phase::BackwardInput, pw::Phase::BackwardWeight}) {
    const pw::LayerFit& f = fit_of(fits, "block", phase);
    const pw::LayerFit truth = synth::truth_fit(t, "block", phase);
    INFO(pw::phase_name(phase));
    CHECK(f.s_per_flop == Approx(truth.s_per_flop).epsilon(0.03));
    if (phase != pw::Phase::BackwardWeight) CHECK(f.s_per_byte == Approx(truth.s_per_byte).epsilon(0.10));
    CHECK(f.overhead_s == Approx(truth.overhead_s).epsilon(0.40));
    CHECK(f.quality.points == 24);
    CHECK(f.quality.max_error_pct < 2.0);
    CHECK(f.quality.r2 > 0.999);
  }
  // W of a block is GEMMs only (no bytes): its byte coefficient has nothing to fit and stays 0.
  CHECK(fit_of(fits, "block", pw::Phase::BackwardWeight).s_per_byte == 0);
  // B of the embedding has no work at all: the fit is its overhead alone.
  const pw::LayerFit& eb = fit_of(fits, "embedding", pw::Phase::BackwardInput);
  CHECK(eb.s_per_flop == 0);
  CHECK(eb.s_per_byte == 0);
  CHECK(eb.overhead_s == Approx(t.overhead_s * 1.3).epsilon(0.01));
}

TEST_CASE("a fit on micro-batch sizes 1, 2 and 4 predicts 8") {
  // One sequence length: FLOPs and bytes both grow in proportion to b, so only their sum is identified,
  // which is all a prediction at another b needs. Noise +-1%; the prediction at b = 8 is within 3%.
  const pw::Model m = synth::tiny("tiny-gpt.json");
  const synth::Truth t;
  const pw::Profile train = synth::profile(m, {1, 2, 4}, {32}, t, 0.01, 11);
  std::vector<std::string> warnings;
  const std::vector<pw::LayerFit> fits = pw::fit_layers(train.layers, "p.json", warnings);
  const pw::Profile exact = synth::profile(m, {8}, {32}, t, 0.0, 1);
  for (const pw::LayerProfile& e : exact.layers) {
    const pw::LayerWork w = pw::profiled_layer_work(e.kind, e.shape, 8, 32, "p");
    for (pw::Phase phase : {pw::Phase::Forward, pw::Phase::BackwardInput, pw::Phase::BackwardWeight}) {
      INFO(e.kind << " " << pw::phase_name(phase));
      CHECK(fit_of(fits, e.kind, phase).predict(pw::phase_work(w, phase)) ==
            Approx(pw::measured_seconds(e, phase)).epsilon(0.03));
    }
  }
}

TEST_CASE("a profile at one micro-batch size is rejected, two sizes fit with a warning") {
  const pw::Model m = synth::tiny("tiny-llama.json");
  const synth::Truth t;
  std::vector<std::string> warnings;
  const pw::Profile one = synth::profile(m, {2}, {32}, t, 0.0, 1);
  CHECK(bad_input([&] { pw::fit_layers(one.layers, "one.json", warnings); }) ==
        "one.json: the embedding layer is profiled at one micro-batch size only (b=2 s=32); the fit needs 2 or more: "
        "profile with --micro-batch-size 1 2 4");
  const pw::Profile two = synth::profile(m, {1, 2}, {32}, t, 0.0, 1);
  pw::fit_layers(two.layers, "two.json", warnings);
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[1] ==
        "two.json: the block layer has 2 micro-batch shapes for 3 parameters (overhead, FLOPs, bytes); its fit is not "
        "unique: profile 3 or more sizes");
}

TEST_CASE("a compute rate that falls with the layer's size is fitted by the FLOP exponent and extrapolated") {
  // Points with no overhead and no bytes term: t = 1e-9 s x 1e6 x (F / 1e6)^1.1 for F = 1, 2, 4, 8 MFLOP.
  // Validation predicts 4 from 1, 2 and 8 from 1, 2, 4: only the form rate^e does so exactly, with the
  // exponent 1.1 (on the grid of 0.005), and its fit on all four then predicts 16 MFLOP exactly:
  // 1e-3 x 16^1.1 s.
  std::vector<pw::PhaseWork> work(4);
  Eigen::VectorXd y(4);
  for (int i = 0; i < 4; ++i) {
    work[static_cast<size_t>(i)].gemm_flops = 1e6 * (1 << i);
    y(i) = 1e-3 * std::pow(1 << i, 1.1);
  }
  std::vector<const pw::PhaseWork*> phases;
  for (const pw::PhaseWork& p : work) phases.push_back(&p);
  const pw::LayerFit f = pw::fit_phase(phases, y);
  CHECK(f.form == "rate^e");
  CHECK(f.flop_exponent == Approx(1.1).margin(1e-9));
  CHECK(f.extrapolation_error_pct == Approx(0).margin(1e-6));
  pw::PhaseWork larger;
  larger.gemm_flops = 16e6;
  CHECK(f.predict(larger) == Approx(1e-3 * std::pow(16, 1.1)).epsilon(1e-3));
  // A rate that rises with the size (a GPU filling up): exponent 0.8.
  for (int i = 0; i < 4; ++i) y(i) = 1e-3 * std::pow(1 << i, 0.8);
  const pw::LayerFit g = pw::fit_phase(phases, y);
  CHECK(g.form == "rate^e");
  CHECK(g.flop_exponent == Approx(0.8).margin(1e-9));
  // With a constant rate the simplest form fits exactly and is kept: rate, exponent 1.
  for (int i = 0; i < 4; ++i) y(i) = 1e-3 * (1 << i);
  const pw::LayerFit h = pw::fit_phase(phases, y);
  CHECK(h.form == "rate");
  CHECK(h.flop_exponent == 1);
  // Fewer than three sizes: nothing to validate on; the general linear form, no extrapolation error.
  const std::vector<const pw::PhaseWork*> two(phases.begin(), phases.begin() + 2);
  const pw::LayerFit k = pw::fit_phase(two, y.head(2));
  CHECK(k.form == "overhead + rate + bytes");
  CHECK(std::isnan(k.extrapolation_error_pct));
}

TEST_CASE("a fixed cost per launch is fitted as overhead + rate") {
  // t = 20 us + F x 1 ns for F = 1, 2, 4 MFLOP (a GPU kernel launch beside its work): predicting 4 from 1
  // and 2, the line through them is exact where rate alone (1.007 ms from the least relative error) and
  // rate^e (exponent log2(2020/1020) = 0.986) are not, so overhead + rate is chosen and its fit on all
  // three gives back 20 us and 1 ns/FLOP.
  std::vector<pw::PhaseWork> work(3);
  Eigen::VectorXd y(3);
  for (int i = 0; i < 3; ++i) {
    work[static_cast<size_t>(i)].gemm_flops = 1e6 * (1 << i);
    y(i) = 20e-6 + 1e-9 * 1e6 * (1 << i);
  }
  std::vector<const pw::PhaseWork*> phases;
  for (const pw::PhaseWork& p : work) phases.push_back(&p);
  const pw::LayerFit f = pw::fit_phase(phases, y);
  CHECK(f.form == "overhead + rate");
  CHECK(f.overhead_s == Approx(20e-6).epsilon(1e-6));
  CHECK(f.s_per_flop == Approx(1e-9).epsilon(1e-6));
  CHECK(f.extrapolation_error_pct == Approx(0).margin(1e-6));
}
