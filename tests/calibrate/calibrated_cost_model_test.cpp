// The calibrated cost model: measured where the calibration kept the exact layer, fitted elsewhere, with
// the run overheads charged through stage_costs() and the link.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "calibrate/calibrated_cost_model.hpp"
#include "core/stage_costs.hpp"
#include "synthetic.hpp"

namespace {

pw::Model tiny_llama() { return pw::load_model(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-llama.json"); }

pw::Workload at(int b, int s) {
  pw::Workload w;
  w.micro_batch_size = b;
  w.seq_len = s;
  return w;
}

}  // namespace

TEST_CASE("calibrated layer times: the measurement for the measured shape, the fit for others") {
  const pw::Model m = tiny_llama();
  const synth::Truth t;
  pw::Calibration c = synth::truth_calibration(t, pw::RunOverheads{});
  const std::string shape = pw::layer_shape(*m.transformer, pw::LayerKind::Block);
  c.measured.push_back({"block", shape, 2, 32, 0.010, 0.020, 0.015, std::nullopt});
  const pw::AnalyticCostModel base;
  const pw::CalibratedCostModel model(c, base);
  const pw::Layer& block = m.layers[1];
  const pw::GpuSpec gpu = pw::cluster_preset("dgx-h100").gpu;

  const pw::LayerWork measured = pw::layer_work(m, block, at(2, 32));
  CHECK(model.phase_time(block, measured, pw::Phase::Forward, gpu, {}, 1) == 0.010);
  CHECK(model.phase_time(block, measured, pw::Phase::BackwardInput, gpu, {}, 1) == 0.020);
  CHECK(model.phase_time(block, measured, pw::Phase::BackwardWeight, gpu, {}, 1) == 0.015);

  // Another micro-batch: overhead + FLOPs x s_per_flop + bytes x s_per_byte of the B fit (factor 1.3).
  const pw::LayerWork other = pw::layer_work(m, block, at(4, 32));
  const double fitted = 1.3 * (t.overhead_s + other.backward_input.flops() * t.s_per_flop +
                               other.backward_input.memory_bytes * t.s_per_byte);
  CHECK(model.phase_time(block, other, pw::Phase::BackwardInput, gpu, {}, 1) == Approx(fitted).epsilon(1e-12));

  // Full recomputation: B adds the measured forward where measured, the forward fit elsewhere.
  pw::Workload full = at(2, 32);
  full.recompute = pw::Recompute::Full;
  CHECK(model.phase_time(block, pw::layer_work(m, block, full), pw::Phase::BackwardInput, gpu, {}, 1) ==
        Approx(0.020 + 0.010));
  full.micro_batch_size = 4;
  const pw::LayerWork full4 = pw::layer_work(m, block, full);
  CHECK(model.phase_time(block, full4, pw::Phase::BackwardInput, gpu, {}, 1) ==
        Approx(fitted + t.overhead_s + full4.forward.flops() * t.s_per_flop + full4.forward.memory_bytes * t.s_per_byte));

  // Explicit layers are the base model's.
  const pw::Model uniform = pw::load_model(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-uniform.json");
  const pw::LayerWork ew = pw::layer_work(uniform, uniform.layers[0], at(1, 1));
  CHECK(model.phase_time(uniform.layers[0], ew, pw::Phase::Forward, gpu, {}, 1) == 0.001);
}

TEST_CASE("run overheads: compute scale and dispatch in the stage costs, transfer cost on the link") {
  const pw::Model m = tiny_llama();
  const synth::Truth t;
  pw::RunOverheads o;
  o.fitted = true;
  o.compute_scale = 1.2;
  o.dispatch_s = 5e-5;
  o.transfer_s = 1e-4;
  const pw::AnalyticCostModel base;
  const pw::CalibratedCostModel plain(synth::truth_calibration(t, pw::RunOverheads{}), base);
  const pw::CalibratedCostModel charged(synth::truth_calibration(t, o), base);
  const pw::Cluster cluster = pw::cluster_preset("dgx-h100");
  pw::ParallelConfig pc;
  pc.pp = 2;
  const std::vector<pw::LayerRange> ranges = pw::split_layers(m, 2, {4, 4});
  const auto a = pw::stage_costs(m, ranges, at(1, 32), pc, cluster, plain, {0, 1});
  const auto b = pw::stage_costs(m, ranges, at(1, 32), pc, cluster, charged, {0, 1});
  for (size_t s = 0; s < 2; ++s) {
    // Each stage phase: its layers x 1.2, plus one dispatch (once per stage, not per layer).
    CHECK(b[s].forward_s == Approx(1.2 * a[s].forward_s + 5e-5));
    CHECK(b[s].backward_input_s == Approx(1.2 * a[s].backward_input_s + 5e-5));
    CHECK(b[s].backward_weight_s == Approx(1.2 * a[s].backward_weight_s + 5e-5));
    CHECK(b[s].optimizer_s == Approx(a[s].parameters * t.optimizer_s_per_parameter));
  }
  const pw::LinkSpec link = charged.p2p_link(cluster.intra_node);
  CHECK(link.bandwidth_bytes_per_s == t.link_bandwidth);
  CHECK(link.latency_s == Approx(t.link_latency_s + 1e-4));
  // Without a link fit: the base model's link, plus the transfer cost.
  pw::Calibration no_link = synth::truth_calibration(t, o);
  no_link.link.reset();
  const pw::LinkSpec fallback = pw::CalibratedCostModel(no_link, base).p2p_link(cluster.intra_node);
  CHECK(fallback.bandwidth_bytes_per_s == base.p2p_link(cluster.intra_node).bandwidth_bytes_per_s);
  CHECK(fallback.latency_s == Approx(cluster.intra_node.latency_s + 1e-4));
  // A link between nodes was not measured (a profile is of one node): the base model's, plus the cost.
  pw::LinkSpec across = cluster.inter_node;
  across.inter_node = true;
  const pw::LinkSpec network = charged.p2p_link(across);
  CHECK(network.bandwidth_bytes_per_s == base.p2p_link(across).bandwidth_bytes_per_s);
  CHECK(network.latency_s == Approx(base.p2p_link(across).latency_s + 1e-4));
}

TEST_CASE("collective efficiency replaces the base model's for the kinds fitted") {
  const synth::Truth t;
  pw::Calibration c = synth::truth_calibration(t, pw::RunOverheads{});
  c.collectives.push_back({pw::CollectiveKind::AllReduce, 0.5, {}, {}});
  const pw::AnalyticCostModel base;
  const pw::CalibratedCostModel model(c, base);
  const pw::LinkSpec link{1e11, 1e-6};
  // Ring all-reduce over 4 ranks: 2 (n-1) latencies + 2 (n-1)/n x bytes / (0.5 x bandwidth).
  CHECK(model.collective_time(pw::CollectiveKind::AllReduce, 1e9, 4, link) == Approx(6e-6 + 1.5 * 1e9 / 5e10));
  CHECK(model.collective_time(pw::CollectiveKind::AllGather, 1e9, 4, link) ==
        base.collective_time(pw::CollectiveKind::AllGather, 1e9, 4, link));
}

TEST_CASE("load_calibrated_cost_model names --calibration on any problem") {
  const pw::AnalyticCostModel base;
  CHECK(bad_input([&] { pw::load_calibrated_cost_model("/nonexistent/c.json", base); }) ==
        "--calibration: calibration file '/nonexistent/c.json' not found");
  const std::string bad = synth::write("bad-calibration.json", "{\"format\": \"pipewright-calibration\", \"version\": 1}");
  CHECK(bad_input([&] { pw::load_calibrated_cost_model(bad, base); }) ==
        "--calibration: " + bad + ": missing required field 'fitted_on'");
  const std::string good = synth::write("good-calibration.json",
                                        pw::calibration_to_json_text(synth::truth_calibration(synth::Truth{}, {})));
  CHECK(pw::load_calibrated_cost_model(good, base)->name() == "calibrated");
}
