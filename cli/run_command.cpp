// `pipewright run`: executes a scenario's schedule for real on the cpu backend (ranks as threads, or as
// processes under mpirun) and holds the simulator's prediction for the same configuration against what
// was measured.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/duration_option.hpp"
#include "cli/failure_injection.hpp"
#include "cli/output_path.hpp"
#include "cli/run_estimate.hpp"
#include "cli/run_processes.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_bounds.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/units.hpp"
#include "core/version.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/cuda/host/cuda_api.hpp"
#include "executor/machine_load.hpp"
#include "executor/measured_trace.hpp"
#include "executor/runtime.hpp"
#include "executor/sleep_backend.hpp"
#include "executor/spin_wait.hpp"
#include "planner/plan_file.hpp"
#include "profiler/core_speed.hpp"
#include "profiler/cpu_profile_estimate.hpp"
#include "profiler/cpu_profiler.hpp"
#include "profiler/profiled_cost_model.hpp"
#include "sim/chrome_trace.hpp"

namespace pw {
namespace {

struct RunCommandOptions {
  ScenarioOptions scenario;
  std::string backend = "cpu";
  std::string compute = "real";
  int iterations = 5;
  int warmup = 1;
  double timeout_s = 60;
  std::string trace;
  bool json = false;
  std::string optimizer = "adam";
  std::string dtype = "bf16";        // --backend cuda
  std::string transport = "auto";    // --backend cuda: auto, nccl or local
  std::string rendezvous;            // --backend cuda under a launcher: file:PATH or tcp:HOST:PORT for the NCCL id
  double lr = 1e-3;
  std::uint64_t seed = 1;
  bool no_profile = false;     // predict with the analytic model instead of profiling first
  std::string inject_failure;  // "RANK:ACTION", a test hook
  std::string ranks_as = "threads";  // or "processes under <launcher>" (cli/run_processes.hpp)
  bool allow_large = false;
};

struct Summary {
  std::vector<double> step_times;  // measured iterations, in order
  double median = 0, min = 0, max = 0, spread_pct = 0;
  const IterationRecord* typical = nullptr;  // the measured iteration closest to the median
};

Summary summarise(const RunResult& r) {
  Summary s;
  std::vector<const IterationRecord*> measured;
  for (const IterationRecord& it : r.iterations)
    if (!it.warmup) measured.push_back(&it);
  for (const IterationRecord* it : measured) s.step_times.push_back(it->step_time_s);
  std::vector<double> sorted = s.step_times;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  s.min = sorted.front();
  s.max = sorted.back();
  s.spread_pct = s.median > 0 ? (s.max - s.min) / s.median * 100 : 0;
  s.typical = *std::min_element(measured.begin(), measured.end(), [&](const IterationRecord* a, const IterationRecord* b) {
    return std::abs(a->step_time_s - s.median) < std::abs(b->step_time_s - s.median);
  });
  return s;
}

void check_options(const RunCommandOptions& o, const Scenario& sc) {
  if (o.backend != "cpu" && o.backend != "cuda") throw_bad_input("--backend: unknown backend '{}'; use cpu or cuda", o.backend);
  if (sc.workload.precision == Precision::Fp8)
    throw_bad_input("--precision: the {} backend computes in {}, not fp8; use --precision bf16", o.backend,
                    o.backend == "cpu" ? "float32" : "its --dtype");
  if (o.backend == "cuda") {
    if (!cuda_built()) throw_bad_input("{}", cuda_not_built_text());
    if (o.compute != "real") throw_bad_input("--compute: the cuda backend runs the layers; use --compute real");
    dtype_from_text(o.dtype);
  } else if (!o.rendezvous.empty()) {
    throw_bad_input("--rendezvous: it hands the NCCL id between processes of the cuda backend; leave it out with --backend {}",
                    o.backend);
  }
  if (o.compute != "real" && o.compute != "sleep")
    throw_bad_input("--compute: must be real or sleep, got '{}'", o.compute);
  if (sc.parallel.tp != 1)
    throw_bad_input("--tp: the {} backend runs pipeline parallelism only, got --tp {}; use --tp 1", o.backend, sc.parallel.tp);
  if (sc.parallel.cp != 1)
    throw_bad_input("--cp: the {} backend runs pipeline parallelism only, got --cp {}; use --cp 1", o.backend, sc.parallel.cp);
  if (o.backend == "cuda" && sc.parallel.dp != 1)
    throw_bad_input("--dp: the {} backend runs one pipeline, got --dp {}; use --dp 1", o.backend, sc.parallel.dp);
  if (sc.parallel.etp != 1)
    throw_bad_input("--etp: the {} backend computes each expert whole, got --etp {}; use --etp 1", o.backend,
                    sc.parallel.etp);
  // The replicas keep whole optimizer states and all-reduce their gradients after the last backward.
  if (sc.parallel.dp > 1 && o.scenario.dp_options.zero_given() && sc.parallel.zero != 0) {
    const CLI::Option* flag = o.scenario.dp_options.distributed_optimizer_flag;
    if (flag && flag->count() > 0)
      throw_bad_input("--distributed-optimizer: the {} backend's replicas keep whole optimizer states (plain data "
                      "parallelism); leave it out",
                      o.backend);
    throw_bad_input("--zero: the {} backend's replicas keep whole optimizer states (plain data parallelism), got "
                    "--zero {}; use --zero 0 or leave it out",
                    o.backend, sc.parallel.zero);
  }
  if (sc.parallel.dp > 1 && o.scenario.dp_options.overlap_given() && sc.parallel.overlap_grad_reduce)
    throw_bad_input("--overlap-grad-reduce: the {} backend's replicas average their gradients after the last "
                    "backward; leave it out",
                    o.backend);
  if (o.scenario.dp_options.precision_aware_optimizer)
    throw_bad_input("--precision-aware-optimizer: the {} backend's optimizer keeps its state at its weights' width; "
                    "leave it out",
                    o.backend);
  if (o.scenario.activation_fp8_input_store)
    throw_bad_input("--activation-func-fp8-input-store: the {} backend keeps the SwiGLU inputs at its own width; leave "
                    "it out",
                    o.backend);
  if (o.iterations < 1) throw_bad_input("--iterations: must be at least 1, got {}", o.iterations);
  if (o.warmup < 0) throw_bad_input("--warmup: must be 0 or more, got {}", o.warmup);
  check_timeout(o.timeout_s);
  // Above 1000 a step overflows float32 weights into inf at once: no learning rate anyone trains with.
  if (!(o.lr > 0 && o.lr <= 1e3 && is_normal_or_zero(o.lr)))
    throw_bad_input("--lr: must be a positive learning rate up to 1000 such as 0.001, got {:g}{}", o.lr,
                    o.lr > 0 && o.lr <= 1e3 ? " (a denormal, below the smallest normal double)" : "");
  optimizer_from_string(o.optimizer);
  if (!sc.synchronous_optimizer)
    throw_bad_input("--no-sync-optimizer: the executor steps the optimizer after a barrier of all ranks; omit it");
  if (o.no_profile && !o.scenario.profile.empty())
    throw_bad_input("--no-profile: it drops the profile that --profile gives; keep one of them");
}

std::string stage_list(const Evaluation& ev, int rank) {
  std::string out;
  for (const StageReport& st : ev.stages)
    if (st.rank == rank) out += fmt::format("{}{}", out.empty() ? "" : ",", st.stage);
  return out;
}

double error_pct(double predicted, double measured) { return measured > 0 ? (predicted - measured) / measured * 100 : 0; }

// "profiled tiny-llama on this machine first (0.41 s): ..." when run measured its own profile.
std::string self_profile_line(const CostModelChain& chain, const Scenario& sc) {
  const std::optional<ProfileOrigin>& origin = chain.profile_origin();
  if (!origin || !origin->path.empty()) return "";
  return fmt::format("profiled {} on this machine first ({:.2f} s, micro-batch {} x {} tokens); --profile FILE reuses a "
                     "saved profile, --no-profile predicts with the analytic model\n",
                     sc.model.name, origin->measured_s, sc.workload.micro_batch_size, sc.workload.seq_len);
}

// What predicted the step: the chain, or why no profile was measured.
std::string predicted_by(const CostModelChain& chain, const RunCommandOptions& o, const Scenario& sc) {
  if (chain.profiled()) return fmt::format("{}; tp links and memory from {}", chain.description(), sc.cluster.name);
  const char* why = o.no_profile                                                  ? "--no-profile"
                    : !sc.model.transformer || sc.model.has_explicit_costs() ? "explicit per-layer costs, nothing to profile"
                                                                              : "processes profile only with --profile FILE";
  return fmt::format("{} on {} ({})", chain.description(), sc.cluster.name, why);
}

// How the prediction shares this machine's cores, for the report; empty when each rank has a core of its own.
std::string shared_cores_line(const Scenario& sc) {
  const SharedCores& c = sc.shared_cores;
  const int ranks = sc.parallel.pp * sc.parallel.dp;
  std::vector<std::string> parts;
  if (c.cores > 0 && c.cores < ranks) parts.push_back(fmt::format("{} ranks take turns on {:g} cores", ranks, c.cores));
  if (c.turns && c.handover_s > 0)
    parts.push_back(fmt::format("a turn handed to a waiting rank adds {} (the profile's hand-over)", format_seconds(c.handover_s)));
  if (c.wakeup_s > 0)
    parts.push_back(fmt::format("a sleeping rank woken on a free core adds {} (the profile's wake-up)", format_seconds(c.wakeup_s)));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// `note`: a line on what runs differently from what the plan or the options said (empty: nothing).
void print_report(std::ostream& out, const RunCommandOptions& o, const CostModelChain& chain, const Evaluation& ev,
                  const RunResult& r, const Summary& s, const std::vector<double>& losses, const LoadVerdict& load,
                  const std::string& note) {
  const Scenario& sc = ev.scenario;
  out << fmt::format("{} on {}: pp {}{}{}{}, schedule {}, {} micro-batches of {} x {} tokens{}\n", sc.model.name,
                     sc.cluster.name, sc.parallel.pp, sc.parallel.vpp > 1 ? fmt::format(", vpp {}", sc.parallel.vpp) : "",
                     sc.parallel.dp > 1 ? fmt::format(", dp {}", sc.parallel.dp) : "",
                     sc.parallel.ep > 1 ? fmt::format(", ep {}", sc.parallel.ep) : "", sc.schedule,
                     sc.parallel.microbatches, sc.workload.micro_batch_size, sc.workload.seq_len,
                     sc.parallel.dp > 1 ? " per replica" : "");
  out << fmt::format("backend {}, {} compute, ranks as {}, {} iteration{} after {} warm-up\n", o.backend, o.compute,
                     o.ranks_as, o.iterations, o.iterations == 1 ? "" : "s", o.warmup);
  out << note << self_profile_line(chain, sc) << "\n";
  auto row = [&](const char* label, const std::string& value) { out << fmt::format("  {:<22}{}\n", label, value); };
  row("measured step time", fmt::format("{} (median of {}; min {}, max {}, spread {:.1f}%)", format_seconds(s.median),
                                        s.step_times.size(), format_seconds(s.min), format_seconds(s.max), s.spread_pct));
  row("predicted step time", fmt::format("{} ({})", format_seconds(ev.sim.step_time_s), predicted_by(chain, o, sc)));
  for (const std::string& line : chain.coverage_lines(sc.model, {sc.workload})) row("", line);
  if (const std::string cores = shared_cores_line(sc); !cores.empty()) row("", cores);
  row("error", fmt::format("{:+.1f}% (predicted vs measured)", error_pct(ev.sim.step_time_s, s.median)));
  row("machine", load.line);
  if (!losses.empty()) row("loss", fmt::format("{:.4f} (first iteration) -> {:.4f} (last)", losses.front(), losses.back()));
  out << "\n";
  // With replicas, a row per worker: replica d's rank r (records at d x pp + r).
  const bool replicas = sc.parallel.dp > 1;
  out << fmt::format("  {:>4}{}  {:<8} {:>10} {:>10} {:>10} {:>10} {:>10}  {:>12} {:>12}\n", "rank",
                     replicas ? fmt::format("  {:>7}", "replica") : "", "stages", "busy", "busy cpu", "idle", "pred busy",
                     "pred idle", "act. peak", "pred peak");
  for (size_t w = 0; w < s.typical->ranks.size(); ++w) {
    const RankStats& p = ev.sim.ranks[w % ev.sim.ranks.size()];
    const RankIteration& m = s.typical->ranks[w];
    out << fmt::format("  {:>4}{}  {:<8} {:>10} {:>10} {:>10} {:>10} {:>10}  {:>12} {:>12}\n", p.rank,
                       replicas ? fmt::format("  {:>7}", w / ev.sim.ranks.size()) : "", stage_list(ev, p.rank),
                       format_seconds(m.busy_s), format_seconds(m.busy_cpu_s), format_seconds(s.typical->step_time_s - m.busy_s),
                       format_seconds(p.busy_s), format_seconds(p.idle_s), format_bytes(r.activation_peak_bytes[w]),
                       format_bytes(p.activation_peak_bytes));
  }
  out << "\n  busy, busy cpu (the rank thread's CPU time in its compute; less than busy when other threads shared\n"
         "  its core) and idle: the iteration whose step time is closest to the median; act. peak: activation bytes\n"
         "  held at once, measured over every iteration (pred: the simulator's, counting what the backend keeps from\n"
         "  F for B and from B for W: float32 tensors on the cpu backend, --dtype ones on the cuda backend)\n";
}

nlohmann::json report_json(const RunCommandOptions& o, const CostModelChain& chain, const Evaluation& ev,
                           const RunResult& r, const Summary& s, const std::vector<double>& losses) {
  using nlohmann::json;
  const Scenario& sc = ev.scenario;
  json ranks = json::array();
  for (size_t w = 0; w < s.typical->ranks.size(); ++w) {
    const RankStats& p = ev.sim.ranks[w % ev.sim.ranks.size()];
    const RankIteration& m = s.typical->ranks[w];
    json stages = json::array();
    for (const StageReport& st : ev.stages)
      if (st.rank == p.rank) stages.push_back(st.stage);
    ranks.push_back({{"rank", p.rank},
                     {"replica", w / ev.sim.ranks.size()},
                     {"stages", stages},
                     {"busy_s", m.busy_s},
                     {"busy_cpu_s", m.busy_cpu_s},
                     {"idle_s", s.typical->step_time_s - m.busy_s},
                     {"predicted_busy_s", p.busy_s},
                     {"predicted_idle_s", p.idle_s},
                     {"activation_peak_bytes", r.activation_peak_bytes[w]},
                     {"predicted_activation_peak_bytes", p.activation_peak_bytes}});
  }
  return json{{"pipewright_version", kVersion},
              {"model", sc.model.name},
              {"cluster", sc.cluster.name},
              {"schedule", sc.schedule},
              {"backend", o.backend},
              {"compute", o.compute},
              {"pp", sc.parallel.pp},
              {"vpp", sc.parallel.vpp},
              {"dp", sc.parallel.dp},
              {"ep", sc.parallel.ep},
              {"microbatches", sc.parallel.microbatches},
              {"micro_batch_size", sc.workload.micro_batch_size},
              {"seq_len", sc.workload.seq_len},
              {"iterations", o.iterations},
              {"warmup", o.warmup},
              {"measured_step_time_s", s.median},
              {"measured_step_times_s", s.step_times},
              {"measured_min_s", s.min},
              {"measured_max_s", s.max},
              {"spread_pct", s.spread_pct},
              {"predicted_step_time_s", ev.sim.step_time_s},
              {"cost_model", chain.model().name()},
              {"cost_model_chain", chain.to_json(sc.model, {sc.workload})},
              {"error_pct", error_pct(ev.sim.step_time_s, s.median)},
              {"losses", losses},
              {"ranks", ranks},
              // The whole scenario in the plan-file form, so that `calibrate` can simulate the run again.
              {"scenario", json::parse(plan_to_json_text(ev, PlanExtras{"run", o.scenario.cost_params, {}, std::nullopt}))}};
}

// Without --profile (and without --no-profile), a model the cpu backend can run is profiled here first,
// quickly, at the run's own micro-batch shape: the prediction then uses this machine's speed. Not under a
// launcher: each process would measure its own profile (and predict with it) while the others run.
void profile_first(const RunCommandOptions& o, const Scenario& scenario, CostModelChain& chain, bool launched) {
  // A profile given, or recorded in the plan, or a calibration: the prediction has its measurements.
  if (chain.profiled() || !o.scenario.calibration.empty() || o.no_profile || launched || !scenario.model.transformer ||
      scenario.model.has_explicit_costs())
    return;
  // A CPU profile says nothing about a GPU: `profile --backend cuda` makes the profile to pass with --profile.
  if (o.backend == "cuda") return;
  const CpuProfileRequest request = quick_profile_request(scenario.workload.micro_batch_size, scenario.workload.seq_len);
  std::vector<WorkEstimate> work = cpu_profile_estimate(scenario.model, request, measured_core_speed());
  for (WorkEstimate& part : work) part.fix = "give --profile FILE or --no-profile, " + part.fix;
  check_work_unless_allowed("run: profiling first", work, o.allow_large);
  const auto start = std::chrono::steady_clock::now();
  Profile profile = profile_cpu(scenario.model, request);
  ProfileOrigin origin;
  origin.tool = profile.tool;
  origin.machine = machine_text(profile.machine);
  origin.measured_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  chain.add_profile(std::move(profile), scenario.model, std::move(origin));
}

// Every rank a thread here. A stalled rank's thread still uses the backend (and the cuda backend's
// transport): they are left alive for it, and the process ends after the error (cli/main.cpp).
RunResult run_threads(const Schedule& schedule, std::unique_ptr<Backend>& backend, const RunOptions& options,
                      CudaBackend* gpu) {
  try {
    return run_schedule(schedule, *backend, options, gpu ? &gpu->transport() : nullptr);
  } catch (const RankStalled&) {
    static_cast<void>(backend.release());
    throw;
  }
}

// What the cpu backend's ranks share on this machine: its cores, when every rank computes here (threads, or
// processes of a launch on one machine) on real layers (a sleeping rank takes no core), and, where more ranks
// than cores keep the waiting ones from spinning (executor/spin_wait.hpp), the wake-up each hand-over then
// costs as the profile measured it.
SharedCores cores_of_run(const RunCommandOptions& o, const Scenario& scenario, const CostModelChain& chain,
                         const LaunchedRun* launched) {
  const int ranks = scenario.parallel.pp * scenario.parallel.dp;
  if (launched && launched->env().local_world_size != launched->env().world_size) return {};
  SharedCores shared;
  if (o.compute == "real") shared.cores = launched ? online_cores() : usable_cores();
  if (!spin_allowed(ranks) && chain.profiled()) shared.wakeup_s = chain.profiled()->profile().machine.wakeup_s;
  // Rank threads of real compute take turns on the cores (executor/core_turns.hpp; run_configuration).
  shared.turns = !launched && o.compute == "real" && shared.cores < ranks;
  if (shared.turns && chain.profiled()) shared.handover_s = chain.profiled()->profile().machine.handover_s;
  return shared;
}

// `launched`: this process is one rank of a launched job; null: every rank is a thread here.
void run_configuration(const RunCommandOptions& o, std::ostream& out, LaunchedRun* launched) {
  check_outputs({{"--trace", o.trace}}, o.scenario.input_paths());
  const std::optional<PlanDocument> doc = o.scenario.plan_document();
  check_outputs({{"--trace", o.trace}}, o.scenario.plan_input_paths(doc));
  Scenario scenario = o.scenario.scenario_of(doc);
  check_options(o, scenario);
  // The prediction counts the memory of the backend that runs: what its layers keep from F for B and from B
  // for W, at its element width (core/kept_bytes.hpp).
  if (o.backend == "cpu") scenario.workload.memory = MemoryAccounting::CpuFloat32;
  // What the executor's replicas do: plain data parallelism, gradients averaged after the last backward.
  std::string note;
  if (scenario.parallel.dp > 1) {
    std::vector<std::string> unlike;
    if (scenario.parallel.zero != 0) unlike.push_back(fmt::format("ZeRO-{}", scenario.parallel.zero));
    if (scenario.parallel.overlap_grad_reduce) unlike.push_back("the reduction overlapped with the backward");
    if (!unlike.empty())
      note = fmt::format("the replicas keep whole optimizer states and average their gradients after the last backward "
                         "(not {}): the prediction is for that\n",
                         fmt::join(unlike, ", "));
    scenario.parallel.zero = 0;
    scenario.parallel.overlap_grad_reduce = false;
    scenario.parallel.overlap_param_gather = false;
  }
  // The executor's optimizer keeps its state as wide as its weights.
  if (scenario.parallel.optimizer_precision.precision_aware) {
    note += "the executor's optimizer keeps its state at the weights' width (not the precision-aware optimizer): the "
            "prediction is for that\n";
    scenario.parallel.optimizer_precision = {};
  }
  // The executor's SwiGLU keeps its input at the backend's own width.
  if (scenario.workload.activation_fp8_input_store) {
    note += "the executor keeps the SwiGLU inputs at its own width (not fp8): the prediction is for that\n";
    scenario.workload.activation_fp8_input_store = false;
  }
  if (o.backend == "cuda")
    scenario.workload.memory = dtype_from_text(o.dtype) == DType::F32 ? MemoryAccounting::CudaFloat32 : MemoryAccounting::CudaBf16;
  check_runs_one_copy(scenario.schedule, schedule_copies(scenario));
  check_work_unless_allowed(
      "run",
      run_estimate(resolve(scenario), {o.iterations, o.warmup, o.backend == "cpu" && o.compute == "real", o.optimizer == "adam"},
                   simulation_source(o.scenario)),
      o.allow_large);
  // The cuda backend's processes may hold several ranks each (a thread per GPU): its process plan checks them.
  if (launched && o.backend != "cuda") launched->check_ranks(scenario.parallel.pp, scenario.parallel.dp);
  if (!o.inject_failure.empty()) parse_injected_failure(o.inject_failure);
  CostModelChain chain = o.scenario.cost_models(scenario.model, doc, executor_cost_params());
  profile_first(o, scenario, chain, launched != nullptr);
  if (o.backend == "cpu") scenario.shared_cores = cores_of_run(o, scenario, chain, launched);
  const Evaluation ev = evaluate(scenario, chain.model());
  std::vector<LayerRange> ranges;
  std::vector<StageCost> costs;
  for (const StageReport& st : ev.stages) {
    ranges.push_back(st.layers);
    costs.push_back(st.cost);
  }

  // An imported schedule runs as given, its own communication order included: what the simulator timed.
  const Schedule& schedule = ev.scenario.imported_schedule ? *ev.scenario.imported_schedule : ev.schedule;
  const std::function<void(int, int, const Action&)> hook = failure_hook(o.inject_failure, schedule);
  std::unique_ptr<Backend> backend;
  CpuBackend* cpu = nullptr;
  CudaBackend* gpu = nullptr;
  if (o.backend == "cuda") {
    // Every process of a launched job probes alike: without a GPU, process 0 alone says so.
    const GpuProbe probe = probe_gpus();
    if (!gpu_present(probe)) {
      if (launched) throw ErrorOfEveryProcess(no_gpu_text(probe));
      throw_runtime("{}", no_gpu_text(probe));
    }
    CudaBackendConfig config;
    config.part = plan_cuda_process(launched ? launched->env() : LaunchEnv{}, schedule.num_ranks(), probe.count,
                                    o.transport, o.rendezvous);
    if (launched)
      config.broadcast = [launched, timeout = o.timeout_s](std::vector<std::byte> bytes) {
        ProcessGroup& group = launched->group();
        try {
          return group.broadcast(std::move(bytes), Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                                      std::chrono::duration<double>(timeout)));
        } catch (const PeerFailed& e) {
          throw RunFailedElsewhere(e.message);
        } catch (const RecvTimeout&) {
          throw_runtime("process {} failed at the NCCL id: process 0 sent none within {:g} s", group.rank(), timeout);
        } catch (const PeerLost& e) {
          throw_runtime("rank {} failed: its process ({}) ended while process {} waited for the NCCL id", e.rank,
                        e.process, group.rank());
        }
      };
    config.recompute = ev.scenario.workload.recompute;
    config.stage_recompute = ev.scenario.stage_recompute;
    config.micro_batch_size = ev.scenario.workload.micro_batch_size;
    config.seq_len = ev.scenario.workload.seq_len;
    config.seed = o.seed;
    config.optimizer.kind = optimizer_from_string(o.optimizer);
    config.optimizer.lr = o.lr;
    config.dtype = dtype_from_text(o.dtype);
    config.transport = o.transport;
    config.timeout_s = o.timeout_s;
    auto b = make_cuda_backend(ev.scenario.model, ranges, schedule, config);
    gpu = b.get();
    backend = std::move(b);
  } else if (o.compute == "real") {
    CpuBackendConfig config;
    config.micro_batch_size = ev.scenario.workload.micro_batch_size;
    config.seq_len = ev.scenario.workload.seq_len;
    config.seed = o.seed;
    config.optimizer.kind = optimizer_from_string(o.optimizer);
    config.optimizer.lr = o.lr;
    config.recompute = ev.scenario.workload.recompute;
    config.stage_recompute = ev.scenario.stage_recompute;
    config.replicas = ev.scenario.parallel.dp;
    config.ep = ev.scenario.parallel.ep;
    auto b = std::make_unique<CpuBackend>(ev.scenario.model, ranges, config);
    cpu = b.get();
    backend = std::move(b);
  } else {
    backend = std::make_unique<SleepBackend>(costs);
  }
  RunOptions options;
  options.iterations = o.iterations;
  options.warmup = o.warmup;
  options.timeout_s = o.timeout_s;
  options.before_action = hook;
  options.replicas = ev.scenario.parallel.dp;
  // The rank threads take turns on the cores as the prediction has them (cores_of_run; executor/core_turns.hpp).
  if (ev.scenario.shared_cores.turns) options.cores = static_cast<int>(ev.scenario.shared_cores.cores);
  const RunResult result = !launched ? run_threads(schedule, backend, options, gpu)
                           : gpu     ? launched->run(schedule, *backend, options, gpu->transport(), gpu->local_ranks())
                                     : launched->run(schedule, *backend, options);
  const Summary summary = summarise(result);
  std::vector<double> losses = cpu ? cpu->losses() : gpu ? gpu->losses() : std::vector<double>{};
  if (launched) {
    losses = launched->losses(losses);
    if (!launched->reports()) return;
  }

  // The load average and cores are this process's machine's (process 0's, under a launcher).
  const MachineLoad load = machine_load_of(result, read_load_average(), launched ? online_cores() : usable_cores());
  const LoadVerdict verdict = judge_machine_load(load, cpu != nullptr, ev.scenario.parallel.pp,
                                                 ev.scenario.shared_cores.cores > 0);
  if (o.json) {
    nlohmann::json report = report_json(o, chain, ev, result, summary, losses);
    report["machine_load"] = machine_load_json(load, verdict);
    out << report.dump(2) << "\n";
  } else {
    print_report(out, o, chain, ev, result, summary, losses, verdict, note);
  }
  if (!o.trace.empty()) {
    nlohmann::json other = {{"model", ev.scenario.model.name}, {"cluster", ev.scenario.cluster.name},
                            {"schedule", ev.scenario.schedule}, {"compute", o.compute},
                            {"predicted_step_time_s", ev.sim.step_time_s}};
    write_json_file(o.trace, measured_trace(*summary.typical, costs, backend->name(), std::move(other)));
  }
}

// Under a launcher (mpirun -np N pipewright run ...) this process runs one rank (cli/run_processes.hpp).
void run_run(const RunCommandOptions& o, std::ostream& out) {
  const LaunchEnv launch = launch_env_from_process();
  if (launch.launcher == "none") return run_configuration(o, out, nullptr);
  // A --timeout out of bounds is reported once, by process 0's check of the options; joining must not
  // overflow its deadline before that.
  const bool timeout_in_bounds = o.timeout_s >= kMinTimeoutS && o.timeout_s <= kMaxTimeoutS;
  run_launched(launch, timeout_in_bounds ? o.timeout_s : RunOptions{}.timeout_s, out, [&](LaunchedRun& launched) {
    RunCommandOptions as_process = o;
    as_process.ranks_as = launched.ranks_as();
    run_configuration(as_process, out, &launched);
  });
}

}  // namespace

CommandRunner add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a configuration for real and compare the measured step with the prediction");
  auto opts = std::make_shared<RunCommandOptions>();
  opts->scenario.add_to(*cmd, /*model_and_cluster_required=*/false);
  opts->scenario.add_plan_option(*cmd, "Run");
  cmd->add_option("--backend", opts->backend, "Execution backend: cpu or cuda")->capture_default_str();
  cmd->add_option("--dtype", opts->dtype, "cuda: bf16 or fp32 activations and GEMM inputs")->capture_default_str();
  cmd->add_option("--transport", opts->transport,
                  "cuda: auto (NCCL when each rank has a GPU, else device-to-device copies), nccl or local")
      ->capture_default_str();
  cmd->add_option("--rendezvous", opts->rendezvous,
                  "cuda under a launcher: file:PATH or tcp:HOST:PORT, where process 0 hands the NCCL id to the others "
                  "(default: MPI under mpirun, MASTER_ADDR:MASTER_PORT otherwise)");
  cmd->add_option("--compute", opts->compute, "real: run the layers; sleep: wait each action's predicted time")
      ->capture_default_str();
  cmd->add_option("--iterations", opts->iterations, "Measured iterations (the median is reported)")->capture_default_str();
  cmd->add_option("--warmup", opts->warmup, "Iterations run first and not measured")->capture_default_str();
  as_duration(cmd->add_option("--timeout", opts->timeout_s,
                              "Time (1ms to 1d; a bare number is seconds) a rank waits for a message or the other "
                              "ranks, or stays inside one action with ranks as threads, before the run fails"),
              1.0)
      ->capture_default_str();
  cmd->add_option("--trace", opts->trace, "Write the measured iteration as a Chrome trace / Perfetto JSON timeline");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  add_allow_large_flag(*cmd, opts->allow_large);
  cmd->add_option("--optimizer", opts->optimizer, "sgd or adam (real compute)")->capture_default_str();
  cmd->add_option("--lr", opts->lr, "Learning rate (real compute)")->capture_default_str();
  opts->scenario.add_profile_option(*cmd);
  cmd->add_flag("--no-profile", opts->no_profile,
                "Predict with the analytic model; without it and without --profile, run profiles this machine first");
  cmd->add_option("--seed", opts->seed, "Seed of the initial weights and the synthetic batches")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);  // "-1" would wrap around to 2^64 - 1
  cmd->add_option("--inject-failure", opts->inject_failure, "Test hook: RANK:ACTION throws there, e.g. 1:1F2; RANK:ACTION:exit ends the process, "
                  "RANK:ACTION:stall hangs it")->group("");
  return [opts, cmd](std::ostream& out) {
    opts->scenario.check_plan_alone(*cmd);
    run_run(*opts, out);
  };
}

}  // namespace pw
