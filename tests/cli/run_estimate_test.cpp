// What `run` estimates the cpu backend's tensors take: the parameters' float32 state and what its layers
// keep, counted once whatever memory accounting the scenario predicts with.
#include <catch2/catch.hpp>

#include "cli/run_estimate.hpp"
#include "core/kept_bytes.hpp"
#include "core/layer_work.hpp"

using namespace pw;

namespace {

// GPT-3 1.3B over 2 stages, 4 micro-batches of 128 tokens.
Scenario small_run() {
  Scenario s;
  s.model = model_preset("gpt3-1.3b");
  s.cluster = cluster_preset("ideal");
  s.parallel.pp = 2;
  s.parallel.microbatches = 4;
  s.workload.seq_len = 128;
  s.schedule = "1f1b";
  return s;
}

}  // namespace

TEST_CASE("run estimate: the cpu backend's tensors, the same under either accounting") {
  Scenario s = small_run();
  const Scenario gpu = resolve(s);
  s.workload.memory = MemoryAccounting::CpuFloat32;
  const Scenario cpu = resolve(s);

  double parameters = 0, kept = 0;
  const TransformerConfig& c = *s.model.transformer;
  for (const Layer& l : s.model.layers) {
    parameters += layer_work(s.model, l, Workload{}).parameters;
    const KeptBytes k = cpu_kept_bytes(c, l.kind, l.block, 1, 128, Recompute::None);
    kept += k.after_forward + k.after_backward;
  }
  const RunWork adam{1, 0, true, true};
  // Adam: value, gradient and two moments, 4 B each; two stages' micro-batches in flight.
  const double expected = 16 * parameters + 2 * kept;
  CHECK(cpu_tensors_estimate(cpu, adam).bytes == Approx(expected).epsilon(1e-12));
  CHECK(cpu_tensors_estimate(gpu, adam).bytes == Approx(expected).epsilon(1e-12));
  const RunWork sgd{1, 0, true, false};
  CHECK(cpu_tensors_estimate(cpu, sgd).bytes == Approx(8 * parameters + 2 * kept).epsilon(1e-12));
}

TEST_CASE("run estimate: data-parallel replicas each hold a copy and record their own actions") {
  Scenario s = small_run();
  const Scenario one = resolve(s);
  s.parallel.dp = 3;
  const Scenario three = resolve(s);
  const RunWork adam{2, 1, true, true};
  CHECK(cpu_tensors_estimate(three, adam).bytes == Approx(3 * cpu_tensors_estimate(one, adam).bytes).epsilon(1e-12));
  CHECK(run_records_estimate(three, adam).bytes == Approx(3 * run_records_estimate(one, adam).bytes).epsilon(1e-12));
  CHECK(cpu_tensors_estimate(three, adam).fix == "run a smaller model or fewer --dp replicas, use --compute sleep");
}
