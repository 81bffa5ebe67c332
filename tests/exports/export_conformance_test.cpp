// The rules each framework's own source sets for what pipewright writes, transcribed with the file and the
// commit read; every export is held to them field by field.
//   torchtitan main b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21): torchtitan/config/configs.py
//     (ParallelismConfig L120-290, TrainingConfig L35-117), torchtitan/trainer.py (Trainer.Config),
//     torchtitan/distributed/activation_checkpoint.py (FullAC), torchtitan/distributed/pipeline_parallel.py.
//   torchtitan v0.2.2 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce: torchtitan/config/job_config.py (Parallelism
//     L311-483, Training L242-308, ActivationCheckpoint L650-717, Model).
//   torchtitan 0.3.0 (PyPI; branch release/0.3 at 4f9e9a47d49dfbcac960857dd67748c67aecd2e5, whose configs.py,
//     trainer.py and pipeline_parallel.py the wheel ships byte for byte): torchtitan/config/configs.py
//     (TrainingConfig L35-108, ParallelismConfig L111-287), torchtitan/trainer.py (Trainer.Config).
//   DeepSpeed edaa7221267243c7be7fb49c5d5f5c4fb97b4641: deepspeed/runtime/config.py (get_pipeline_config and
//     the batch keys), deepspeed/runtime/pipe/engine.py (the "pipeline" keys read), deepspeed/runtime/pipe/module.py
//     (PipelineModule.__init__ L125-137).
//   PyTorch 1f1416a34fd869bab1df91ac807ced3e3f11c722: torch/distributed/pipelining/schedules.py (_action_regex,
//     _Action.from_str), runtime.py (_load_csv, stage placement from the rows).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/cluster.hpp"
#include "core/model.hpp"
#include "../planner/planned.hpp"
#include "planner/baseline_splits.hpp"
#include "exports/deepspeed.hpp"
#include "exports/torchtitan.hpp"
#include "schedules/generators.hpp"
#include "schedules/pytorch_csv.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

const std::set<std::string> kTitanParallelism = {
    "data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
    "enable_fsdp_symm_mem", "tensor_parallel_degree", "enable_sequence_parallel", "spmd_backend",
    "pipeline_parallel_degree", "module_fqns_per_model_part", "pipeline_parallel_first_stage_less_layers",
    "pipeline_parallel_last_stage_less_layers", "pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule",
    "pipeline_parallel_schedule_csv", "num_pp_microbatches", "context_parallel_degree",
    "context_parallel_load_balancer", "context_parallel_ptrr_mask_key", "expert_parallel_degree"};
const std::set<std::string> kTitanTraining = {
    "num_tokens_per_microbatch_per_dp_rank", "num_tokens_per_train_step", "max_context_length", "max_norm", "steps",
    "enable_cpu_offload", "disable_cuda_graphs", "dtype", "mixed_precision_param", "mixed_precision_reduce", "gc_freq",
    "gc_debug"};
const std::set<std::string> kV022Parallelism = {
    "data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
    "tensor_parallel_degree", "disable_loss_parallel", "enable_async_tensor_parallel", "pipeline_parallel_degree",
    "module_fqns_per_model_part", "pipeline_parallel_first_stage_less_layers",
    "pipeline_parallel_last_stage_less_layers", "pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule",
    "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatch_size", "pipeline_parallel_expert_parallel_overlap",
    "context_parallel_degree", "context_parallel_load_balancer", "context_parallel_rotate_method",
    "expert_parallel_degree", "expert_tensor_parallel_degree", "expert_parallel_comm_backend"};
const std::set<std::string> kV022Training = {"local_batch_size", "global_batch_size", "seq_len", "steps"};
const std::set<std::string> kV022ActivationCheckpoint = {"mode", "selective_ac_option"};
const std::set<std::string> kV022Model = {"name", "flavor"};
// 0.3.0's configs.py is main's but for the micro-batch (main counts them, 0.3.0 sizes them) and the batch
// (main in tokens, 0.3.0 in sequences): the same ParallelismConfig and TrainingConfig fields otherwise.
std::set<std::string> swapped(std::set<std::string> fields, const std::set<std::string>& out,
                              const std::set<std::string>& in) {
  for (const std::string& f : out)
    if (fields.erase(f) != 1) throw std::logic_error("no field " + f + " to swap");
  fields.insert(in.begin(), in.end());
  return fields;
}
const std::set<std::string> kV030Parallelism =
    swapped(kTitanParallelism, {"num_pp_microbatches"}, {"pipeline_parallel_microbatch_size"});
const std::set<std::string> kV030Training =
    swapped(kTitanTraining, {"num_tokens_per_microbatch_per_dp_rank", "num_tokens_per_train_step", "max_context_length"},
            {"local_batch_size", "global_batch_size", "seq_len"});
// What a 0.3.0 run must be told to be the plan (the rest keep torchtitan's or the model config's values).
const std::set<std::string> kV030Needed = {
    "data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree", "enable_sequence_parallel",
    "context_parallel_degree", "expert_parallel_degree", "pipeline_parallel_degree", "pipeline_parallel_schedule",
    "pipeline_parallel_microbatch_size", "module_fqns_per_model_part", "local_batch_size", "global_batch_size",
    "seq_len", "disable_cuda_graphs"};
// get_schedule_class's names (PyTorch schedules.py).
const std::set<std::string> kTorchSchedules = {"1F1B",        "Interleaved1F1B",       "GPipe",
                                               "LoopedBFS",   "InterleavedZeroBubble", "PipelineScheduleSingle",
                                               "PipelineScheduleMulti", "ZBVZeroBubble", "DualPipeV"};

Evaluation plan(const std::string& model, const std::string& schedule, int pp, int dp, int vpp, int zero,
                Recompute recompute) {
  Scenario s = test::preset_scenario(model, 1, pp, dp, 1, 8 * pp * dp);
  s.parallel.vpp = vpp;
  s.parallel.zero = zero;
  s.parallel.overlap_grad_reduce = false;
  s.schedule = schedule;
  s.workload.recompute = recompute;
  return test::planned(s);
}

// The names assigned as `<prefix><name> =` in the text.
std::set<std::string> assigned(const std::string& text, const std::string& prefix) {
  std::set<std::string> out;
  const std::regex re("^" + prefix + "([a-z_0-9]+) = ");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, re)) out.insert(m[1]);
  }
  return out;
}

// The keys by section, each line that opens a section or names a key matched whole or from its start.
std::map<std::string, std::set<std::string>> keys_by_section(const std::string& text, const std::regex& section_line,
                                                             const std::regex& key) {
  std::map<std::string, std::set<std::string>> out;
  std::string section;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, section_line))
      section = m[1];
    else if (std::regex_search(line, m, key))
      out[section].insert(m[1]);
  }
  return out;
}

// TOML keys by section.
std::map<std::string, std::set<std::string>> toml_keys(const std::string& text) {
  return keys_by_section(text, std::regex(R"(\[([a-z_0-9]+)\])"), std::regex("^([a-z_0-9]+) = "));
}

// The keys of 0.3.0's FIELDS dict by section.
std::map<std::string, std::set<std::string>> dict_keys(const std::string& text) {
  return keys_by_section(text, std::regex(R"re(    "([a-z_]+)": \{)re"), std::regex(R"re(^        "([a-z_0-9]+)": )re"));
}

void check_subset(const std::set<std::string>& used, const std::set<std::string>& known, const std::string& what) {
  for (const std::string& name : used) {
    INFO(what << ": " << name);
    CHECK(known.count(name) == 1);
  }
}

// Every cell as PyTorch's _Action.from_str reads it: its regex matched whole, or a composite of such.
void check_csv_grammar(const std::string& csv) {
  // torch 2.15's _Action.from_str: a micro-batch on computations, sends, receives and send waits; none
  // on the FSDP and gradient-reduction bookkeeping.
  const std::regex action(
      R"((\d+)(F|I|B|W|SEND_F|RECV_F|SEND_B|RECV_B|WAIT_SEND_F|WAIT_SEND_B)(\d+)|(\d+)(UNSHARD|RESHARD|REDUCE_GRAD|WAIT_REDUCE_GRAD))");
  const std::regex composite(R"(\((\d+F\d+);(\d+B\d+)\)OVERLAP_F_B)");
  std::istringstream in(csv);
  for (std::string row; std::getline(in, row, '\n');) {
    REQUIRE(!row.empty());
    CHECK(row.back() == '\r');  // csv.writer's line end
    row.pop_back();
    std::istringstream cells(row);
    for (std::string cell; std::getline(cells, cell, ',');) {
      INFO(cell);
      CHECK((std::regex_match(cell, action) || std::regex_match(cell, composite)));
    }
  }
}

}  // namespace

TEST_CASE("torchtitan exports name only the fields of the config classes they target (main, v0.2.2 and 0.3.0)") {
  struct Case {
    std::string model, schedule;
    int pp, dp, vpp, zero;
    Recompute recompute;
  };
  for (const Case& c : {Case{"llama3-8b", "1f1b", 4, 2, 1, 3, Recompute::None},
                        Case{"llama3-8b", "interleaved", 4, 1, 2, 0, Recompute::Full},
                        Case{"llama3-8b", "zb-h1", 2, 2, 1, 0, Recompute::None},
                        Case{"llama3-8b", "v-half", 2, 1, 1, 0, Recompute::None},
                        Case{"llama3-8b", "dualpipev", 2, 2, 1, 3, Recompute::Full},
                        Case{"gpt3-1.3b", "gpipe", 2, 1, 1, 0, Recompute::None}}) {
    INFO(c.model << " " << c.schedule);
    const Evaluation ev = plan(c.model, c.schedule, c.pp, c.dp, c.vpp, c.zero, c.recompute);
    const std::vector<ExportFile> files = torchtitan_export(ev, "out");
    check_subset(assigned(files[0].text, "    p\\."), kTitanParallelism, "ParallelismConfig (main)");
    check_subset(assigned(files[0].text, "    config\\.training\\."), kTitanTraining, "TrainingConfig (main)");
    // Every stage's modules: the decoder's top-level children (torchtitan/models/common/decoder.py).
    CHECK(files[0].text.find("\"output\"") == std::string::npos);
    CHECK(files[0].text.find("\"lm_head\"]") != std::string::npos);
    const auto sections = toml_keys(files[1].text);
    for (const auto& [section, keys] : sections) {
      INFO("[" << section << "]");
      const std::set<std::string>& known = section == "parallelism"             ? kV022Parallelism
                                           : section == "training"              ? kV022Training
                                           : section == "activation_checkpoint" ? kV022ActivationCheckpoint
                                           : section == "model"                 ? kV022Model
                                                                                : std::set<std::string>{};
      check_subset(keys, known, section);
    }
    CHECK(files[1].text.find("\"lm_head\"") == std::string::npos);
    // 0.3.0: every field the run needs, each one configs.py has, and the same module names as main.
    const auto fields = dict_keys(files[2].text);
    REQUIRE(fields.size() == 2);
    check_subset(fields.at("parallelism"), kV030Parallelism, "ParallelismConfig (0.3.0)");
    check_subset(fields.at("training"), kV030Training, "TrainingConfig (0.3.0)");
    std::set<std::string> named = fields.at("parallelism");
    named.insert(fields.at("training").begin(), fields.at("training").end());
    for (const std::string& name : kV030Needed) {
      INFO(name);
      CHECK(named.count(name) == 1);
    }
    CHECK(files[2].text.find("\"output\"") == std::string::npos);
    CHECK(files[2].text.find("\"lm_head\"],\n        ],\n") != std::string::npos);
    // The schedule is a get_schedule_class name; a CSV only under a name whose placement matches its rows.
    const std::regex schedule_line("pipeline_parallel_schedule = \"([A-Za-z0-9]+)\"");
    std::smatch m;
    REQUIRE(std::regex_search(files[1].text, m, schedule_line));
    CHECK(kTorchSchedules.count(m[1]) == 1);
    if (files.size() == 4) {
      check_csv_grammar(files[3].text);
      const Schedule back = schedule_from_pytorch_csv(files[3].text, "csv");
      CHECK(back.placement.kind == (m[1] == "ZBVZeroBubble" ? PlacementKind::V : PlacementKind::Loop));
    }
  }
}

TEST_CASE("every schedule's PyTorch CSV keeps PyTorch's grammar and stage placement (each stage on the rank of its row)") {
  for (const std::string& name : schedule_names())
    for (int p : {2, 4}) {
      if (model_copies(name) > 1) continue;  // refused: PyTorch runs one copy of the model (pytorch_csv_test.cpp)
      const Schedule s = make_schedule({name, p, 2 * p, chunks_per_rank(name, 2)});
      for (const Schedule& form : {s, lower(s)}) {
        INFO(name << " p" << p << " lowered " << form.lowered);
        const std::string csv = schedule_to_pytorch_csv(form);
        check_csv_grammar(csv);
        // runtime.py places each stage on the rank whose row holds its actions: one rank per stage, and
        // m forwards of each stage.
        const Schedule back = schedule_from_pytorch_csv(csv, "csv");
        CHECK(back.placement.stage_rank == s.placement.stage_rank);
        std::map<int, int> forwards;
        for (const auto& list : back.ranks)
          for (const Action& a : list)
            if (a.op == Op::F || a.op == Op::FB) ++forwards[a.stage];
        for (int st = 0; st < s.num_stages(); ++st) CHECK(forwards[st] == 2 * p);
      }
    }
}

TEST_CASE("DeepSpeed exports write only the keys DeepSpeed reads and PipelineModule's own arguments") {
  const std::set<std::string> top = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                     "bf16", "zero_optimization", "pipeline", "activation_checkpointing"};
  const std::set<std::string> pipeline_read = {"pipe_partitioned", "grad_partitioned", "use_reentrant",
                                               "activation_checkpoint_interval"};
  const std::set<std::string> module_args = {"layers", "num_stages", "topology", "loss_fn", "seed_layers", "seed_fn",
                                             "base_seed", "partition_method", "activation_checkpoint_interval",
                                             "activation_checkpoint_func", "checkpointable_layers", "dynamic_shape"};
  for (Recompute r : {Recompute::None, Recompute::Full}) {
    const Evaluation ev = plan("llama3-8b", "1f1b", 4, 2, 1, 1, r);
    const std::vector<ExportFile> files = deepspeed_export(ev);
    const nlohmann::json config = nlohmann::json::parse(files[0].text);
    for (const auto& [key, value] : config.items()) {
      INFO(key);
      CHECK(top.count(key) == 1);
    }
    if (config.contains("pipeline"))
      for (const auto& [key, value] : config["pipeline"].items()) {
        INFO("pipeline." << key);
        CHECK(pipeline_read.count(key) == 1);
      }
    // config.py's _batch_assertion: train_batch_size == micro x gradient_accumulation_steps x dp.
    CHECK(config["train_batch_size"].get<int>() == config["train_micro_batch_size_per_gpu"].get<int>() *
                                                       config["gradient_accumulation_steps"].get<int>() * 2);
    // The keyword arguments of the PipelineModule call, module.py L125-137.
    const std::regex call(R"(\((layers=layers, [^)]*)\))");
    std::smatch m;
    REQUIRE(std::regex_search(files[1].text, m, call));
    std::istringstream args(m[1].str());
    for (std::string arg; std::getline(args, arg, ',');) {
      const std::string name = arg.substr(arg.find_first_not_of(' '), arg.find('=') - arg.find_first_not_of(' '));
      if (name.starts_with("**")) continue;
      INFO(name);
      CHECK(module_args.count(name) == 1);
    }
  }
}
