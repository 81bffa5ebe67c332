// `pipewright profile`: measures a model's layers, the optimizer and the rank-to-rank link on this machine's
// CPU (or, with --backend cuda, its GPUs and NCCL links) and writes the profile that `run --profile` predicts
// with.
#include <memory>

#include "cli/commands.hpp"
#include "cli/duration_option.hpp"
#include "cli/output_path.hpp"
#include "cli/work_bounds.hpp"
#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/units.hpp"
#include "core/version.hpp"
#include "kernels/kernel_table_writer.hpp"
#include "profiler/core_speed.hpp"
#include "profiler/cpu_gemm_table.hpp"
#include "profiler/model_gemms.hpp"
#include "profiler/cpu_profile_estimate.hpp"
#include "profiler/cpu_profiler.hpp"
#include "profiler/cpu_serving_profile.hpp"
#include "profiler/cuda/host/cuda_profiler_api.hpp"

namespace pw {
namespace {

struct ProfileCommandOptions {
  std::string backend = "cpu";
  std::string model;
  std::vector<int> micro_batch_sizes{1};
  int seq_len = 0;
  std::string out;
  double min_time_s = 0.2;
  int link_repetitions = 5;
  // --backend cuda
  std::string dtype = "bf16";
  bool links = false;
  int tp = 0, dp = 0;
  std::string cluster_out;
  std::string kernels_out;
  bool serving = false;
  bool allow_large = false;
};

std::string timing_text(const PhaseTiming& t) {
  const double spread = t.median_s > 0 ? (t.p90_s - t.p10_s) / t.median_s * 100 : 0;
  return fmt::format("{} ±{:.0f}%", format_seconds(t.median_s), spread / 2);
}

void print_profile(std::ostream& out, const Profile& p, const std::string& model) {
  out << fmt::format("{} on {} ({} {}), {} thread per rank\n\n", model, p.machine.device, p.machine.cores,
                     p.machine.backend == "cuda" ? "SMs" : "cores", p.machine.threads_per_rank);
  out << fmt::format("  {:<10} {:>3} {:>5}  {:>16} {:>16} {:>16}  {:>11} {:>11} {:>10}\n", "layer", "b", "s", "F", "B",
                     "W", "activations", "kept for W", "output");
  for (const LayerProfile& l : p.layers)
    out << fmt::format("  {:<10} {:>3} {:>5}  {:>16} {:>16} {:>16}  {:>11} {:>11} {:>10}\n", l.kind, l.micro_batch_size,
                       l.seq_len, timing_text(l.forward), timing_text(l.backward_input), timing_text(l.backward_weight),
                       format_bytes(l.activation_bytes), format_bytes(l.weight_grad_bytes), format_bytes(l.output_bytes));
  out << "\n  F, B, W: median over the repetitions, ± half the p10..p90 range\n";
  out << fmt::format("  optimizer (Adam): {} per million parameters\n\n", format_seconds(p.optimizer_s_per_parameter * 1e6));
  // The CUDA profiler's report names its links itself (NCCL or a device copy).
  if (p.machine.backend == "cuda") return;
  for (const LinkProfile& l : p.links) {
    out << fmt::format("  link rank {} -> rank {} (threads, one copy per message)\n", l.src, l.dst);
    out << fmt::format("  {:>10} {:>12} {:>12}\n", "size", "time", "bandwidth");
    for (const LinkSample& s : l.samples)
      out << fmt::format("  {:>10} {:>12} {:>12}\n", format_bytes(s.bytes), format_seconds(s.time_s),
                         format_rate(s.time_s > 0 ? s.bytes / s.time_s : 0));
    out << "  " << link_fit_text(l) << "\n";
  }
}

void print_serving(std::ostream& out, const ServingProfile& s) {
  out << "\n  serving: each kind of layer over a grid of batches (prefill chunks, decodes, both), fitted per kind\n";
  out << fmt::format("  {:<10} {:>10} {:>14} {:>14} {:>14} {:>12}  {}\n", "layer", "per call", "per GFLOP", "per attn GFLOP",
                     "per MB of KV", "per sequence", "worst fit");
  for (const ServingKindRates& k : s.kinds) {
    std::vector<ServingSample> mine;
    for (const ServingSample& x : s.samples)
      if (x.kind == k.kind) mine.push_back(x);
    const ServingRates& r = k.rates;
    out << fmt::format("  {:<10} {:>10} {:>14} {:>14} {:>14} {:>12}  {}\n", k.kind, format_seconds(r.call_s),
                       format_seconds(r.s_per_gemm_flop * 1e9), format_seconds(r.s_per_attention_flop * 1e9),
                       format_seconds(r.s_per_kv_byte * 1e6), format_seconds(r.s_per_sequence),
                       format_percent(worst_relative_error(r, mine)));
  }
}

void run_profile(const ProfileCommandOptions& o, std::ostream& out) {
  if (o.backend != "cpu" && o.backend != "cuda") throw_bad_input("--backend: unknown backend '{}'; use cpu or cuda", o.backend);
  if (o.backend == "cuda" && !cuda_built()) throw_bad_input("{}", cuda_not_built_text());
  if (o.backend == "cpu" && o.links) throw_bad_input("--links: measures NCCL links between GPUs; use it with --backend cuda");
  if (!o.cluster_out.empty() && !o.links) throw_bad_input("--cluster-out: the measured matrix needs --links");
  if (!o.kernels_out.empty()) check_new_kernel_folder(o.kernels_out);
  if (o.backend == "cuda" && o.serving)
    throw_bad_input("--serving: only the cpu backend times serving batches so far; use --backend cpu");
  check_outputs({{"--out", o.out}, {"--cluster-out", o.cluster_out}}, {{"--model", o.model}});
  const DType dtype = dtype_from_text(o.dtype);
  if (!(o.min_time_s >= 0)) throw_bad_input("--min-time: must be 0 or more seconds, got {}", o.min_time_s);
  if (o.link_repetitions < 1) throw_bad_input("--link-repetitions: must be at least 1, got {}", o.link_repetitions);
  if (o.seq_len < 0) throw_bad_input("--seq-len: must be positive (leave it out for the model's), got {}", o.seq_len);
  Model model;
  try {
    model = load_model(o.model);
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("--model: {}", e.what()));
  }
  Profile p;
  CudaProfileResult gpu;
  std::string out_kernels;
  if (o.backend == "cuda") {
    CudaProfileRequest request;
    request.micro_batch_sizes = o.micro_batch_sizes;
    request.seq_len = o.seq_len;
    request.dtype = dtype;
    request.options.min_time_s = o.min_time_s;
    request.links = o.links;
    request.link_repetitions = o.link_repetitions;
    request.tp = o.tp;
    request.dp = o.dp;
    if (!o.kernels_out.empty()) request.kernel_gemms = model_gemm_shapes(model, o.micro_batch_sizes, o.seq_len);
    gpu = profile_cuda(model, request);
    p = gpu.profile;
    if (gpu.kernel_tables) {
      write_kernel_tables(o.kernels_out, *gpu.kernel_tables);
      out_kernels = fmt::format("\nwrote {} ({} GEMM shapes of {}, bf16 on GPU 0, system '{}')\n", o.kernels_out,
                                request.kernel_gemms.size(), model.name, gpu.kernel_tables->system);
    }
  } else {
    CpuProfileRequest request;
    request.micro_batch_sizes = o.micro_batch_sizes;
    request.seq_len = o.seq_len;
    request.options.min_time_s = o.min_time_s;
    request.link_repetitions = o.link_repetitions;
    const CoreSpeed core = measured_core_speed();
    std::vector<WorkEstimate> work = cpu_profile_estimate(model, request, core);
    if (o.serving) work.push_back(cpu_serving_profile_estimate(model, 0));
    std::vector<GemmShape> shapes;
    if (!o.kernels_out.empty()) {
      shapes = model_gemm_shapes(model, o.micro_batch_sizes, o.seq_len);
      work.push_back(cpu_gemm_sweep_estimate(shapes, request.options, core));
    }
    check_work_unless_allowed("profile", work, o.allow_large);
    p = profile_cpu(model, request);
    if (o.serving) {
      ServingProfileRequest serving;
      serving.options.min_time_s = o.min_time_s;
      p.serving = profile_cpu_serving(model, serving);
    }
    if (!o.kernels_out.empty()) {
      KernelTablesOut tables;
      tables.system = "cpu";
      tables.software = fmt::format("pipewright {} profiler (cpu)", kVersion);
      tables.source = "pipewright profile --kernels-out";
      tables.tables.push_back(time_cpu_gemms(shapes, request.options));
      write_kernel_tables(o.kernels_out, tables);
      out_kernels = fmt::format("\nwrote {} ({} GEMM shapes of {}, float32 on this CPU)\n", o.kernels_out, shapes.size(),
                                model.name);
    }
  }
  p.model = profiled_model_of(model);
  print_profile(out, p, model.name);
  if (p.serving) print_serving(out, *p.serving);
  out << gpu.report;
  if (!o.cluster_out.empty()) {
    if (!gpu.cluster) throw_runtime("--cluster-out: one GPU has no links to put in a measured matrix; run on 2 GPUs or more");
    write_output_file(o.cluster_out, cluster_to_json_text(*gpu.cluster));
    out << fmt::format("\nwrote {}\n", o.cluster_out);
  }
  if (!o.out.empty()) {
    write_output_file(o.out, profile_to_json_text(p));
    out << fmt::format("\nwrote {}\n", o.out);
  }
  out << out_kernels;
}

}  // namespace

CommandRunner add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Measure a model's layers and the rank-to-rank link on this machine");
  auto opts = std::make_shared<ProfileCommandOptions>();
  cmd->add_option("--backend", opts->backend, "Backend to profile: cpu or cuda")->capture_default_str();
  cmd->add_option("--model", opts->model, "Model preset or model JSON (transformer form)")->required();
  cmd->add_option("--micro-batch-size", opts->micro_batch_sizes, "Micro-batch sizes to profile (several allowed)")
      ->capture_default_str();
  cmd->add_option("--seq-len", opts->seq_len, "Sequence length (default: the model's)");
  cmd->add_option("--out", opts->out, "Write the profile JSON here");
  as_duration(cmd->add_option("--min-time", opts->min_time_s,
                              "Time of timed runs per layer and micro-batch size (seconds, or with a unit: 200ms)"),
              1.0)
      ->capture_default_str();
  cmd->add_option("--link-repetitions", opts->link_repetitions, "Round trips per message size")->capture_default_str();
  cmd->add_option("--dtype", opts->dtype, "cuda: bf16 or fp32 layers")->capture_default_str();
  cmd->add_flag("--serving", opts->serving, "cpu: also time serving batches and fit serving rates (for serve run)");
  cmd->add_flag("--links", opts->links,
                "cuda: every GPU pair's NCCL link (1 KiB to 1 GiB), collectives over the tp and dp groups, the GEMM "
                "slowdown beside NCCL traffic");
  cmd->add_option("--tp", opts->tp, "cuda --links: tensor-parallel group size for the collectives (0: every GPU)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--dp", opts->dp, "cuda --links: data-parallel group size for the collectives (0: 1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cluster-out", opts->cluster_out, "cuda --links: write this node as a cluster JSON with its measured matrix");
  cmd->add_option("--kernels-out", opts->kernels_out,
                  "Also time every GEMM shape the model runs (cpu: float32; cuda: bf16 on GPU 0) and write them as a "
                  "folder of kernel tables (docs/kernel-tables.md), for `kernels compare` and --kernels");
  add_allow_large_flag(*cmd, opts->allow_large);
  return [opts](std::ostream& out) { run_profile(*opts, out); };
}

}  // namespace pw
