// The CUDA backend on a GPU: the numerical check against the CPU backend, schedules run on the GPU against
// the CPU backend's training, the CLI. Without a GPU (or without CUDA built) each test says why it is
// skipped and checks the error a user gets instead.
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>

#include "../cli/cli_test_util.hpp"
#include "../executor/executor_test_util.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/cuda/host/cuda_api.hpp"
#include "executor/runtime.hpp"
#include "profiler/profile.hpp"
#include "schedules/generators.hpp"

using namespace pw;

namespace {

// Whether a GPU is here to test on; otherwise a message naming the reason (shown with the test's output).
bool have_gpu() {
  if (!cuda_built()) {
    WARN("skipped: this pipewright was built without CUDA (-DPIPEWRIGHT_CUDA=ON builds it)");
    return false;
  }
  const GpuProbe probe = probe_gpus();
  if (gpu_present(probe)) return true;
  WARN("skipped: " << no_gpu_text(probe));
  return false;
}

Schedule four_stages(const std::string& name) {
  ScheduleSpec spec;
  spec.name = name;
  spec.ranks = 4;
  spec.microbatches = 8;
  return make_schedule(spec);
}

// One stage per rank over 4 + 2 layers: embedding and a block, a block each, a block and the head.
std::vector<LayerRange> four_ranges() { return {{0, 1}, {2, 2}, {3, 3}, {4, 5}}; }

// The CPU backend's training the GPU runs are held to: micro-batch 2, SGD at 0.1 (no optimizer state to
// differ in), with the given recomputation.
CpuBackendConfig reference_cpu(Recompute level = Recompute::None, std::vector<Recompute> stages = {}) {
  CpuBackendConfig c;
  c.micro_batch_size = 2;
  c.optimizer.kind = OptimizerKind::Sgd;
  c.optimizer.lr = 0.1;
  c.recompute = level;
  c.stage_recompute = std::move(stages);
  return c;
}

// The same training on the GPU in fp32 (whose GEMMs accumulate in fp32 with no TF32).
CudaBackendConfig fp32_like(const CpuBackendConfig& cpu, const std::string& transport = "auto") {
  CudaBackendConfig c;
  c.micro_batch_size = cpu.micro_batch_size;
  c.optimizer = cpu.optimizer;
  c.dtype = DType::F32;
  c.transport = transport;
  c.recompute = cpu.recompute;
  c.stage_recompute = cpu.stage_recompute;
  return c;
}

// Every iteration's loss within 1e-4 of the CPU backend's: from the second on they depend on the summed
// gradients and the update.
void check_same_losses(const std::vector<double>& gpu, const std::vector<double>& cpu) {
  REQUIRE(gpu.size() == cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) CHECK(gpu[i] == Approx(cpu[i]).epsilon(1e-4));
}

}  // namespace

TEST_CASE("without a GPU the cuda backend says why, in one line", "[cuda][gpu]") {
  const GpuProbe probe = probe_gpus();
  if (gpu_present(probe)) {
    WARN("a GPU is here: the no-GPU messages are not reachable");
    return;
  }
  const CliResult r = run_cli({"profile", "--backend", "cuda", "--model", source_path("examples/tiny-llama.json")});
  if (!cuda_built()) {
    CHECK(r.code == 2);
    CHECK(r.err == "error: " + cuda_not_built_text() + "\n");
  } else {
    CHECK(r.code == 1);
    CHECK(r.err == "error: " + no_gpu_text(probe) + "\n");
    // The CUDA runtime without a driver answers this way; a machine with a driver and no device says it found 0.
    CHECK((r.err.find("cudaGetDeviceCount failed") != std::string::npos ||
           r.err.find("found 0 devices") != std::string::npos));
  }
  const CliResult run = run_cli({"run", "--backend", "cuda", "--model", source_path("examples/tiny-llama.json"), "--pp",
                                 "4", "--microbatches", "8", "--schedule", "1f1b", "--cluster", "dgx-h100"});
  CHECK(run.code == (cuda_built() ? 1 : 2));
  CHECK(run.err == "error: " + (cuda_built() ? no_gpu_text(probe) : cuda_not_built_text()) + "\n");
}

TEST_CASE("numerical check: GPU layers against the CPU backend, bf16 within 2e-2 and fp32 within 1e-4", "[cuda][gpu]") {
  if (!have_gpu()) return;
  for (const Model& model : {test::tiny_llama(3), test::tiny_gpt(3)})
    for (DType dtype : {DType::F32, DType::BF16}) {
      const NumericalCheck check = check_against_cpu(model, 2, 2, model.transformer->max_seq_len, dtype, 7);
      // On stdout as well, unwrapped, for scripts/gpu-check.sh to quote.
      std::cout << model.name << ", 2 stages:\n" << check.table() << std::flush;
      INFO(model.name << " " << to_string(dtype) << "\n" << check.table());
      CHECK(check.passed());
    }
}

TEST_CASE("numerical check with recompute: full and selective reruns give the gradients without it", "[cuda][gpu]") {
  if (!have_gpu()) return;
  const Model model = test::tiny_llama(3);
  for (Recompute level : {Recompute::Full, Recompute::Selective})
    for (DType dtype : {DType::F32, DType::BF16}) {
      const NumericalCheck check = check_against_cpu(model, 2, 2, model.transformer->max_seq_len, dtype, 7, level);
      std::cout << model.name << ", 2 stages, recompute " << to_string(level) << ":\n" << check.table() << std::flush;
      INFO(to_string(level) << " " << to_string(dtype) << "\n" << check.table());
      CHECK(check.passed());
    }
}

TEST_CASE("recompute on the GPU trains as the CPU backend's recompute does (1F1B, 4 ranks, fp32, SGD)", "[cuda][gpu]") {
  if (!have_gpu()) return;
  const Model model = test::tiny_llama(4);
  const Schedule schedule = four_stages("1f1b");
  RunOptions options;
  options.iterations = 2;
  struct Case {
    Recompute level;
    std::vector<Recompute> stages;
  };
  std::vector<double> kept_peaks;  // with every activation kept: recompute holds less
  for (const Case& c : {Case{Recompute::None, {}}, Case{Recompute::Full, {}}, Case{Recompute::Selective, {}},
                        Case{Recompute::None, {Recompute::Full, Recompute::Selective, Recompute::None, Recompute::Full}}}) {
    const CpuBackendConfig cpu_config = reference_cpu(c.level, c.stages);
    CpuBackend cpu(model, four_ranges(), cpu_config);
    run_schedule(schedule, cpu, options);
    const auto gpu = make_cuda_backend(model, four_ranges(), schedule, fp32_like(cpu_config, "local"));
    const RunResult result = run_schedule(schedule, *gpu, options, &gpu->transport());
    INFO(to_string(c.level) << " with " << c.stages.size() << " stage levels");
    check_same_losses(gpu->losses(), cpu.losses());
    for (double peak : result.activation_peak_bytes) CHECK(peak > 0);
    if (kept_peaks.empty()) {
      kept_peaks = result.activation_peak_bytes;
    } else if (c.stages.empty()) {
      // Rank 1 holds one block and nothing else: full keeps its input only, selective drops the s x s part.
      CHECK(result.activation_peak_bytes[1] < kept_peaks[1]);
    }
  }
}

TEST_CASE("tied embeddings on the GPU train as the CPU backend's do: the two copies' gradients summed", "[cuda][gpu]") {
  if (!have_gpu()) return;
  TransformerConfig c = *test::tiny_llama(4).transformer;
  c.tied_embeddings = true;
  const Model model = make_transformer_model("tied", c);
  // The copies on two ranks (1F1B on 4: summed through the other rank's memory) and on one rank (a 1-rank
  // schedule: summed in place).
  struct Case {
    Schedule schedule;
    std::vector<LayerRange> ranges;
  };
  ScheduleSpec one;
  one.name = "1f1b";
  one.ranks = 1;
  one.microbatches = 4;
  for (const Case& k : {Case{four_stages("1f1b"), four_ranges()}, Case{make_schedule(one), {{0, 5}}}}) {
    RunOptions options;
    options.iterations = 3;
    CpuBackend cpu(model, k.ranges, reference_cpu());
    run_schedule(k.schedule, cpu, options);
    const auto gpu = make_cuda_backend(model, k.ranges, k.schedule, fp32_like(reference_cpu()));
    run_schedule(k.schedule, *gpu, options, &gpu->transport());
    INFO(k.schedule.num_ranks() << " ranks over " << gpu->placement_text());
    check_same_losses(gpu->losses(), cpu.losses());
  }
}

TEST_CASE("1F1B and ZB-H1 on 4 ranks on the GPU train as the CPU backend does (fp32, SGD)", "[cuda][gpu]") {
  if (!have_gpu()) return;
  const Model model = test::tiny_llama(4);
  for (const std::string name : {"1f1b", "zb-h1"}) {
    const Schedule schedule = four_stages(name);
    RunOptions options;
    options.iterations = 3;
    CpuBackend cpu(model, four_ranges(), reference_cpu());
    run_schedule(schedule, cpu, options);
    for (const std::string transport : {"local", "nccl"}) {
      if (transport == "nccl" && probe_gpus().count < 4) {
        WARN("nccl transport skipped: 4 ranks need 4 GPUs, " << probe_gpus().count << " here");
        continue;
      }
      const auto gpu = make_cuda_backend(model, four_ranges(), schedule, fp32_like(reference_cpu(), transport));
      const RunResult result = run_schedule(schedule, *gpu, options, &gpu->transport());
      INFO(name << " over " << gpu->placement_text());
      check_same_losses(gpu->losses(), cpu.losses());
      // Training lowers the loss, and the activations the ranks held were counted.
      CHECK(gpu->losses().back() < gpu->losses().front());
      for (double peak : result.activation_peak_bytes) CHECK(peak > 0);
    }
  }
}

TEST_CASE("the CLI profiles the GPU and runs a plan on it", "[cuda][gpu]") {
  if (!have_gpu()) return;
  const std::string profile = std::string(PIPEWRIGHT_TEST_TMP) + "/gpu_test_profile.json";
  const CliResult p = run_cli({"profile", "--backend", "cuda", "--model", source_path("examples/tiny-llama.json"),
                               "--min-time", "0.05", "--out", profile});
  INFO(p.out << p.err);
  REQUIRE(p.code == 0);
  const Profile loaded = load_profile(profile);
  CHECK(loaded.machine.backend == "cuda");
  CHECK(loaded.layers.size() == 3);
  CHECK_FALSE(loaded.links.empty());
  const CliResult r = run_cli({"run", "--backend", "cuda", "--model", source_path("examples/tiny-llama.json"), "--pp", "4",
                               "--microbatches", "8", "--schedule", "zb-h1", "--cluster", "dgx-h100", "--profile", profile,
                               "--iterations", "3"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("backend cuda") != std::string::npos);
}
