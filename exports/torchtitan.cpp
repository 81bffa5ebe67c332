#include "exports/torchtitan.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.hpp"
#include "core/units.hpp"
#include "core/version.hpp"
#include "schedules/pytorch_csv.hpp"
#include "exports/exports.hpp"

namespace pw {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string torch_schedule_name(const Scenario& s) {
  const int group = s.schedule == "interleaved" ? interleaved_group_size(s) : s.parallel.pp;
  if (s.schedule == "gpipe") return "GPipe";
  if (s.schedule == "1f1b") return "1F1B";
  if (s.schedule == "interleaved" && group == s.parallel.pp) return "Interleaved1F1B";
  if (s.schedule == "zb-v") return "ZBVZeroBubble";
  if (s.schedule == "dualpipev") return "DualPipeV";
  return "";
}

std::vector<std::vector<std::string>> torchtitan_module_fqns(const Model& model, const std::vector<LayerRange>& ranges,
                                                             const std::string& output) {
  if (!model.transformer)
    throw_bad_input("--export torchtitan: model '{}' gives explicit layer costs; torchtitan's module names "
                    "(tok_embeddings, layers.N, norm, lm_head) need a transformer",
                    model.name);
  std::vector<std::vector<std::string>> out;
  for (const LayerRange& r : ranges) {
    std::vector<std::string> names;
    for (int i = r.first; i <= r.last; ++i) {
      const Layer& l = model.layers[static_cast<size_t>(i)];
      if (l.kind == LayerKind::Embedding) names.push_back("tok_embeddings");
      if (l.kind == LayerKind::Block) names.push_back(fmt::format("layers.{}", i - 1));
      if (l.kind == LayerKind::Head) {
        names.push_back("norm");
        names.push_back(output);
      }
    }
    out.push_back(std::move(names));
  }
  return out;
}

namespace {

// The torchtitan configs of pipewright's presets: main's config_registry function and v0.2.2's model name
// and flavor (torchtitan/models/<name>/__init__.py there).
struct TitanModel {
  const char* preset;
  const char* module;    // main: torchtitan.models.<module>.config_registry
  const char* function;  // main: its function; "" when main has none
  const char* name;      // v0.2.2 [model] name
  const char* flavor;    // v0.2.2 [model] flavor
};
constexpr TitanModel kTitanModels[] = {
    {"llama3-8b", "llama3", "llama3_8b", "llama3", "8B"},
    {"llama3-70b", "llama3", "llama3_70b", "llama3", "70B"},
    {"llama3-405b", "llama3", "llama3_405b", "llama3", "405B"},
    {"qwen3-30b-a3b", "qwen3", "qwen3_30b_a3b", "qwen3", "30B-A3B"},
    {"qwen3-235b-a22b", "qwen3", "", "qwen3", "235B-A22B"},
    {"gpt-oss-120b", "gpt_oss", "gpt_oss_120b", "gpt_oss", "120b"},
};

const TitanModel* titan_model(const Model& model) {
  for (const TitanModel& m : kTitanModels)
    if (model.name == m.preset) return &m;
  return nullptr;
}

std::string python_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + quoted(names[i]);
  return out + "]";
}

// What torchtitan is given for the plan's parallelism, shared by both forms.
struct TitanPlan {
  int replicate = 1, shard = 1;
  bool fsdp = false;
  std::string schedule;  // pipeline_parallel_schedule
  bool csv = false;
};

// Refuses what torchtitan cannot run as simulated; returns the degrees and the schedule name.
TitanPlan titan_plan(const Scenario& s, const Schedule& schedule) {
  const ParallelConfig& pc = s.parallel;
  // torchtitan/distributed/parallel_dims.py: fsdp_enabled is dp_shard > 1 or cp > 1, the weights sharded
  // over the dp_shard x cp ranks.
  if (pc.dp_replicas() > 1 && pc.zero != 3)
    throw_bad_input("--dp-shard: torchtitan shards within groups and replicates across them (HSDP) only with FSDP, "
                    "not ZeRO-{}; use --zero 3 with --dp-shard and --export torchtitan",
                    pc.zero);
  if (pc.cp > 1 && pc.zero != 3)
    throw_bad_input("--zero: torchtitan shards weights and gradients over the cp ranks (FSDP) whenever cp > 1, not "
                    "ZeRO-{}; use --zero 3 with --cp and --export torchtitan",
                    pc.zero);
  if (s.workload.precision == Precision::Fp8)
    throw_bad_input("--precision: torchtitan's float8 runs torchao's scaling recipes, not the Transformer Engine fp8 "
                    "pipewright simulates; use --precision bf16 with --export torchtitan");
  if (s.workload.recompute == Recompute::Selective)
    throw_bad_input("--recompute: torchtitan's selective checkpointing (SelectiveAC) is op-level, saving matmul "
                    "outputs and recomputing every second one, not the attention-core recomputation pipewright "
                    "simulates; use --recompute none or full with --export torchtitan");
  if (s.model.transformer && s.model.transformer->mtp_layers > 0)
    throw_bad_input("--export torchtitan: torchtitan's models have no multi-token-prediction modules under pipeline "
                    "parallelism (deepseek_v3's MTPDecoder refuses pp); plan '{}' without them (mtp_layers 0 in its "
                    "model JSON)",
                    s.model.name);
  if (pc.tp > 1 && !s.workload.sequence_parallel)
    throw_bad_input("--no-sequence-parallel: torchtitan v0.2.2 runs sequence parallelism whenever tp > 1; plan with "
                    "sequence parallelism for --export torchtitan");
  // torchtitan/distributed/parallel_dims.py: "expert_parallel_degree ({ep}) must divide dp_shard * cp * tp"; its
  // sparse mesh (pp, dp_replicate, efsdp, ep) puts ep consecutive ranks in a group, the experts whole (etp 1),
  // their state sharded over efsdp = dp_shard * cp * tp / ep and replicated over dp_replicate.
  TitanPlan t;
  t.fsdp = pc.zero == 3;
  t.shard = t.fsdp ? pc.dp / pc.dp_replicas() : 1;
  t.replicate = t.fsdp ? pc.dp_replicas() : pc.dp;
  if (pc.ep > 1 && (pc.etp != 1 || (static_cast<long>(t.shard) * pc.cp * pc.tp) % pc.ep != 0 || pc.dp_replicas() > 1))
    throw_bad_input("--ep: torchtitan folds ep {} into dp_shard x cp x tp = {} x {} x {} (FSDP's shards) with whole "
                    "experts (etp 1); plan with --zero 3, no --dp-shard and --etp 1, or an --ep dividing {}, for --export "
                    "torchtitan",
                    pc.ep, t.shard, pc.cp, pc.tp, static_cast<long>(t.shard) * pc.cp * pc.tp);
  if (pc.ep > 1 && s.workload.dispatcher != Workload::Dispatcher::AllToAll)
    throw_bad_input("--dispatcher: torchtitan's expert parallelism dispatches with all-to-alls, not the flex "
                    "dispatcher's node-deduplicated copies; use --dispatcher alltoall with --export torchtitan");
  if (pc.dp_cp() > 1) check_zero_level(ExportTarget::Torchtitan, pc.zero);
  // torchtitan/trainer.py: each micro-batch's tokens divide over the tp ranks (sequence parallel) and the
  // cp ranks' head and tail halves.
  const long tokens = static_cast<long>(s.workload.micro_batch_size) * s.workload.seq_len;
  const long shards = static_cast<long>(pc.tp) * (pc.cp > 1 ? 2 * pc.cp : 1);
  if (tokens % shards != 0)
    throw_bad_input("--seq-len: torchtitan splits each micro-batch's {} tokens over tp {} x {} context shards; use a "
                    "sequence length that {} divides",
                    tokens, pc.tp, pc.cp > 1 ? 2 * pc.cp : 1, shards);
  // 0.3.0's trainer.py holds each sequence to it, not the micro-batch.
  if (s.workload.seq_len % shards != 0)
    throw_bad_input("--seq-len: torchtitan 0.3.0 splits each sequence of {} tokens over tp {} x {} context shards; use "
                    "a sequence length that {} divides",
                    s.workload.seq_len, pc.tp, pc.cp > 1 ? 2 * pc.cp : 1, shards);
  t.schedule = torch_schedule_name(s);
  t.csv = t.schedule.empty();
  if (t.csv) {
    // torchtitan places stages by the schedule's name, even for a CSV: V for ZBVZeroBubble, loop otherwise.
    const PlacementKind kind = schedule.placement.kind;
    if (kind == PlacementKind::Explicit)
      throw_bad_input("--export torchtitan: schedule {} puts its stages on ranks neither in loop nor in V order, and "
                      "torchtitan places stages only those two ways; plan with another schedule",
                      s.schedule);
    t.schedule = kind == PlacementKind::V ? "ZBVZeroBubble" : "PipelineScheduleMulti";
  }
  return t;
}

// The three forms: torchtitan main's Python config, v0.2.2's TOML and 0.3.0's Python config.
enum class Form { Main, V022, V030 };

// A field a form sets and its value as Python writes it (and TOML, for the values v0.2.2 takes); a list of
// lists has `rows` instead, one a line.
struct Field {
  std::string name, value;
  std::vector<std::string> rows;
};

// How a form writes its fields: `p.name = value` (main), `name = value` (TOML) or `"name": value,` (0.3.0's
// dict), the rows of a list one level further in.
struct Style {
  std::string indent, prefix;
  bool dict = false;
  std::string row_indent;
};

std::string render(const std::vector<Field>& fields, const Style& st) {
  std::string out;
  for (const Field& f : fields) {
    const std::string lhs = st.indent + (st.dict ? quoted(f.name) + ": " : st.prefix + f.name + " = ");
    const std::string end = st.dict ? ",\n" : "\n";
    if (f.rows.empty()) {
      out += lhs + f.value + end;
      continue;
    }
    out += lhs + "[\n";
    for (const std::string& row : f.rows) out += st.row_indent + row + ",\n";
    out += st.indent + "]" + end;
  }
  return out;
}

// The ParallelismConfig fields (v0.2.2: [parallelism] keys) of the plan.
std::vector<Field> parallelism_fields(const Scenario& s, const TitanPlan& t, const std::vector<LayerRange>& ranges,
                                      const std::string& csv_path, Form form) {
  const ParallelConfig& pc = s.parallel;
  std::vector<Field> f{{"data_parallel_replicate_degree", std::to_string(t.replicate), {}},
                       {"data_parallel_shard_degree", std::to_string(t.shard), {}}};
  if (t.fsdp) f.push_back({"fsdp_reshard_after_forward", quoted(to_string(pc.reshard_after_forward)), {}});
  f.push_back({"tensor_parallel_degree", std::to_string(pc.tp), {}});
  // v0.2.2 has no switch: sequence parallelism whenever tp > 1.
  if (form != Form::V022)
    f.push_back({"enable_sequence_parallel", pc.tp > 1 && s.workload.sequence_parallel ? "True" : "False", {}});
  f.push_back({"context_parallel_degree", std::to_string(pc.cp), {}});
  f.push_back({"expert_parallel_degree", std::to_string(pc.ep), {}});
  f.push_back({"pipeline_parallel_degree", std::to_string(pc.pp), {}});
  f.push_back({"pipeline_parallel_schedule", quoted(t.schedule), {}});
  if (t.csv) f.push_back({"pipeline_parallel_schedule_csv", quoted(csv_path), {}});
  // main counts the micro-batches; v0.2.2 and 0.3.0 size them, n_microbatches = local_batch_size /
  // pipeline_parallel_microbatch_size (torchtitan/distributed/pipeline_parallel.py).
  if (form == Form::Main)
    f.push_back({"num_pp_microbatches", std::to_string(pc.microbatches), {}});
  else
    f.push_back({"pipeline_parallel_microbatch_size", std::to_string(s.workload.micro_batch_size), {}});
  Field fqns{"module_fqns_per_model_part", "", {}};
  for (const auto& stage : torchtitan_module_fqns(s.model, ranges, form == Form::V022 ? "output" : "lm_head"))
    fqns.rows.push_back(python_list(stage));
  f.push_back(std::move(fqns));
  return f;
}

// The TrainingConfig fields (v0.2.2: [training] keys) of the plan.
std::vector<Field> training_fields(const Scenario& s, Form form) {
  const long seq = s.workload.seq_len, mbs = s.workload.micro_batch_size, batch = s.global_batch_size;
  std::vector<Field> f;
  if (form == Form::Main) {
    f = {{"num_tokens_per_microbatch_per_dp_rank", std::to_string(mbs * seq), {}},
         {"num_tokens_per_train_step", std::to_string(batch * seq), {}},
         {"max_context_length", std::to_string(seq), {}}};
  } else {
    // trainer.py: global_batch_size / (local_batch_size x dp) gradient-accumulation steps. With pp, a step's
    // local_batch_size sequences go through the pipeline in micro-batches (one step here); without, the
    // model takes local_batch_size sequences at once, so that is the micro-batch and the steps count them.
    const long local = s.parallel.pp > 1 ? mbs * s.parallel.microbatches : mbs;
    f = {{"local_batch_size", std::to_string(local), {}},
         {"global_batch_size", std::to_string(batch), {}},
         {"seq_len", std::to_string(seq), {}}};
  }
  // trainer.py (main and 0.3.0): CUDA graphs, on by default, refuse pipeline and expert parallelism.
  if (form != Form::V022) f.push_back({"disable_cuda_graphs", "True", {}});
  return f;
}

// A Python form's opening comment and imports: `release` names the torchtitan, `module` the file.
std::string python_head(const std::string& header, const std::string& release, const std::string& module,
                        const std::string& imports, const Scenario& s, const TitanModel* known) {
  std::string py = fmt::format(
      "# {}\n"
      "# torchtitan {}: a run is a function returning Trainer.Config. Run this plan with\n"
      "#   PYTHONPATH=<this folder> torchrun --nproc_per_node=<GPUs per node> ... -m torchtitan.train \\\n"
      "#       --module {} --config {}\n"
      "# on {} GPUs in all. module_fqns_per_model_part below assumes {} transformer layers (layers.0 ..\n"
      "# layers.{}); torchtitan drops any module a stage does not list without a word.\n",
      header, release, module, known && *known->function ? "pipewright_plan" : "<your function calling apply_plan>",
      s.parallel.gpus(), s.model.num_blocks(), s.model.num_blocks() - 1);
  py += imports + "from torchtitan.distributed.activation_checkpoint import FullAC\nfrom torchtitan.trainer import Trainer\n";
  if (known && *known->function)
    py += fmt::format("from torchtitan.models.{}.config_registry import {}\n", known->module, known->function);
  return py;
}

// A Python form's closing: pipewright_plan() on torchtitan's own config of the model, or how to write one.
std::string python_tail(const Scenario& s, const TitanModel* known) {
  if (known && *known->function)
    return fmt::format("\n\ndef pipewright_plan() -> Trainer.Config:\n    return apply_plan({}())\n", known->function);
  return fmt::format("\n\n# pipewright knows no torchtitan config of '{}': give yours to apply_plan, e.g.\n"
                     "#   def my_plan() -> Trainer.Config:\n#       return apply_plan(my_model_config())\n",
                     s.model.name);
}

}  // namespace

std::vector<ExportFile> torchtitan_export(const Evaluation& plan, const std::string& dir) {
  const Scenario& s = plan.scenario;
  const ParallelConfig& pc = s.parallel;
  const TitanPlan t = titan_plan(s, plan.schedule);
  std::vector<LayerRange> ranges;
  for (const StageReport& st : plan.stages) ranges.push_back(st.layers);
  const std::string csv_path = (std::filesystem::path(dir) / "pipewright_schedule.csv").generic_string();
  const TitanModel* known = titan_model(s.model);
  const bool full = s.workload.recompute == Recompute::Full;
  const std::string checkpointing = full ? "FullAC.Config()" : "None";
  const std::string header = fmt::format("pipewright {}: {} on {}, {} GPUs (tp {}, cp {}, pp {}, dp {}{}), {} schedule; "
                                         "predicted {} per step, {} peak memory.",
                                         kVersion, s.model.name, s.cluster.name, pc.gpus(), pc.tp, pc.cp, pc.pp, pc.dp,
                                         pc.ep > 1 ? fmt::format(", ep {}", pc.ep) : "", s.schedule,
                                         format_seconds(plan.metrics.step_time_s),
                                         format_bytes(plan.metrics.peak_memory_bytes));

  // main: the Python config module.
  std::string py = python_head(header, "main (b5bcd76c, Aug 2026)", "pipewright_plan", "", s, known);
  py += "\n\ndef apply_plan(config: Trainer.Config) -> Trainer.Config:\n    p = config.parallelism\n";
  py += render(parallelism_fields(s, t, ranges, csv_path, Form::Main), {"    ", "p.", false, "        "});
  py += render(training_fields(s, Form::Main), {"    ", "config.training.", false, ""});
  py += fmt::format("    config.activation_checkpoint = {}\n    return config\n", checkpointing);
  py += python_tail(s, known);

  // v0.2.2: the TOML file.
  std::string toml = fmt::format(
      "# {}\n"
      "# torchtitan v0.2.2 (the last release read from TOML): torchrun ... -m torchtitan.train --job.config_file "
      "torchtitan_v0.2.2.toml\n"
      "# Keys of torchtitan/config/job_config.py at v0.2.2; module_fqns_per_model_part assumes {} transformer layers.\n",
      header, s.model.num_blocks());
  if (known) {
    toml += fmt::format("\n[model]\nname = {}\nflavor = {}\n", quoted(known->name), quoted(known->flavor));
  } else {
    toml += fmt::format("# pipewright knows no torchtitan model for '{}': add its [model] name and flavor.\n",
                        s.model.name);
  }
  toml += "\n[parallelism]\n" + render(parallelism_fields(s, t, ranges, csv_path, Form::V022), {"", "", false, "  "});
  toml += "\n[training]\n" + render(training_fields(s, Form::V022), {"", "", false, ""});
  toml += fmt::format("\n[activation_checkpoint]\nmode = {}\n", full ? "\"full\"" : "\"none\"");

  // 0.3.0: the Python config module, each field checked before any is set (a dataclass without slots would
  // take a field it lacks as a new attribute that nothing reads).
  std::string v030 = python_head(header, "0.3.0 (PyPI; branch release/0.3 at 4f9e9a47, Aug 2026)",
                                 "pipewright_plan_v0_3_0", "import dataclasses\n\nimport torchtitan\n", s, known);
  v030 += "\n# The ParallelismConfig and TrainingConfig fields of torchtitan 0.3.0 (torchtitan/config/configs.py).\n"
          "WRITTEN_FOR = \"0.3.0\"\nFIELDS = {\n    \"parallelism\": {\n";
  v030 += render(parallelism_fields(s, t, ranges, csv_path, Form::V030), {"        ", "", true, "            "});
  v030 += "    },\n    \"training\": {\n";
  v030 += render(training_fields(s, Form::V030), {"        ", "", true, ""});
  v030 += "    },\n}\n";
  v030 += fmt::format(
      "\n\ndef apply_plan(config: Trainer.Config) -> Trainer.Config:\n"
      "    # Every field is checked before any is set: one this torchtitan lacks would be a new attribute it never reads\n"
      "    # (or, on its slotted dataclasses, an error half-way).\n"
      "    _require(config, [\"activation_checkpoint\", *FIELDS])\n"
      "    for section, values in FIELDS.items():\n"
      "        _require(getattr(config, section), values)\n"
      "    for section, values in FIELDS.items():\n"
      "        for name, value in values.items():\n"
      "            setattr(getattr(config, section), name, value)\n"
      "    config.activation_checkpoint = {}\n"
      "    return config\n"
      "\n\n"
      "def _require(obj, names):\n"
      "    have = {{f.name for f in dataclasses.fields(obj)}}\n"
      "    for name in names:\n"
      "        if name not in have:\n"
      "            raise AttributeError(\n"
      "                f\"{{type(obj).__qualname__}} has no field {{name!r}}: this plan sets torchtitan {{WRITTEN_FOR}}'s \"\n"
      "                f\"fields (installed: {{torchtitan.__version__}}); use pipewright's export for your version\"\n"
      "            )\n",
      checkpointing);
  v030 += python_tail(s, known);

  std::vector<ExportFile> files{ExportFile{"pipewright_plan.py", py}, ExportFile{"torchtitan_v0.2.2.toml", toml},
                                ExportFile{"pipewright_plan_v0_3_0.py", v030}};
  if (t.csv) files.push_back(ExportFile{"pipewright_schedule.csv", schedule_to_pytorch_csv(plan.schedule)});
  return files;
}

}  // namespace pw
