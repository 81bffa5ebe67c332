#include "exports/deepspeed.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/units.hpp"
#include "core/version.hpp"
#include "planner/baseline_splits.hpp"
#include "exports/exports.hpp"

namespace pw {

bool deepspeed_uniform(const Model& model, const std::vector<LayerRange>& ranges) {
  return parts_from_ranges(ranges) ==
         deepspeed_partition_uniform(model.num_layers(), static_cast<int>(ranges.size()));
}

std::vector<ExportFile> deepspeed_export(const Evaluation& plan) {
  const Scenario& s = plan.scenario;
  const ParallelConfig& pc = s.parallel;
  if (s.schedule != "1f1b")
    throw_bad_input("--export deepspeed: DeepSpeed's pipeline engine runs its own 1F1B order, not {}; plan with "
                    "--schedules 1f1b",
                    s.schedule);
  if (s.workload.recompute == Recompute::Selective)
    throw_bad_input("--export deepspeed: DeepSpeed checkpoints whole layers (activation_checkpoint_interval), not "
                    "selectively; plan with --recompute none or full");
  if (pc.dp > 1) check_zero_level(ExportTarget::DeepSpeed, pc.zero);
  // deepspeed/runtime/pipe/schedule.py (DeepSpeed edaa7221): TrainSchedule issues ReduceGrads after every
  // micro-batch's backward, so the engine reduces the gradients after the last backward, never behind it.
  if (pc.dp > 1 && pc.overlap_grad_reduce)
    throw_bad_input("--overlap-grad-reduce: DeepSpeed's pipeline engine reduces gradients after the last backward "
                    "(ReduceGrads); plan with --no-overlap-grad-reduce for --export deepspeed");
  if (pc.dp_replicas() > 1)
    throw_bad_input("--dp-shard: DeepSpeed's pipeline engine shards ZeRO-1 state over all of dp; use --dp-shard {} (or "
                    "none) with --export deepspeed",
                    pc.dp);
  if (pc.cp > 1)
    throw_bad_input("--cp: DeepSpeed's pipeline engine has no ring-attention context parallelism (its Ulysses "
                    "sequence parallelism splits heads, not the sequence's K/V); use --cp 1 with --export deepspeed");
  if (s.workload.precision == Precision::Fp8)
    throw_bad_input("--precision: DeepSpeed's config has no fp8 training mode (Transformer Engine layers are the "
                    "model's business); use --precision bf16 with --export deepspeed");
  std::vector<LayerRange> ranges;
  for (const StageReport& st : plan.stages) ranges.push_back(st.layers);
  const std::vector<int> parts = parts_from_ranges(ranges);
  // deepspeed/runtime/pipe/module.py (DeepSpeed edaa7221), PipelineModule._partition_layers: the split is
  // partition_method's, 'uniform' or 'parameters' (the default) when one of them gives the plan's bounds;
  // no method takes bounds, so any other split is set by a subclass overriding that method.
  const char* method = deepspeed_uniform(s.model, ranges)                                   ? "uniform"
                       : parts == parts_from_ranges(parameters_split(s.model, pc.pp)) ? "parameters"
                                                                                          : nullptr;
  const bool full = s.workload.recompute == Recompute::Full;

  // deepspeed/runtime/config.py get_pipeline_config copies the "pipeline" section, and pipe/engine.py reads
  // only pipe_partitioned, grad_partitioned, use_reentrant and activation_checkpoint_interval of it: the
  // stage count and the split are PipelineModule's arguments. A positive interval here overrides the
  // module's; 0 would not turn the module's off, so none is written without recomputation.
  nlohmann::ordered_json config;
  config["train_batch_size"] = s.global_batch_size;
  config["train_micro_batch_size_per_gpu"] = s.workload.micro_batch_size;
  config["gradient_accumulation_steps"] = pc.microbatches;
  config["bf16"] = {{"enabled", true}};
  config["zero_optimization"] = {{"stage", pc.zero}};
  if (full) {
    config["pipeline"] = {{"activation_checkpoint_interval", 1}};
    config["activation_checkpointing"] = {{"partition_activations", pc.tp > 1},
                                          {"cpu_checkpointing", false},
                                          {"contiguous_memory_optimization", false},
                                          {"synchronize_checkpoint_boundary", false}};
  }
  std::vector<ExportFile> files{ExportFile{"ds_config.json", config.dump(2) + "\n"}};

  std::string layer_list;
  for (size_t i = 0; i < s.model.layers.size(); ++i) {
    const Layer& l = s.model.layers[i];
    // Name the ends and the blocks as a range, so that the comment stays short for deep models.
    if (i == 0 || i + 1 == s.model.layers.size() || l.kind != LayerKind::Block)
      layer_list += fmt::format("#   {:>4}: {}\n", i, l.name);
    else if (i == 1 || s.model.layers[i - 1].kind != LayerKind::Block)
      layer_list += fmt::format("#   {:>4}..{}: {} .. {}\n", i, s.model.num_layers() - 2, l.name,
                                s.model.layers[static_cast<size_t>(s.model.num_layers() - 2)].name);
  }
  // With tensor parallelism the module needs the three-axis topology; without, num_stages makes one.
  const std::string tp_note =
      pc.tp > 1 ? fmt::format("# Tensor parallelism (tp {}) comes from your model code's mpu (e.g. Megatron-DeepSpeed's\n"
                              "# --tensor-model-parallel-size {}) and the topology below.\n",
                              pc.tp, pc.tp)
                : "";
  const std::string stages_arg =
      pc.tp > 1 ? fmt::format("topology=PipeModelDataParallelTopology(num_pp={}, num_mp={}, num_dp={})", pc.pp, pc.tp, pc.dp)
                : fmt::format("num_stages={}", pc.pp);
  std::string text = fmt::format(
      "# pipewright {}: {} on {}, {} GPUs (tp {}, pp {}, dp {}); predicted {} per step, {} peak memory.\n"
      "#\n"
      "# The plan's stages for DeepSpeed's PipelineModule (deepspeed/runtime/pipe/module.py), which decides the\n"
      "# split (ds_config.json cannot: DeepSpeed reads no stage count or partition from it). Build the module with\n"
      "#   from pipewright_partition import pipeline_module\n"
      "#   model = pipeline_module(layers, loss_fn=...)\n"
      "# where `layers` is pipewright's layer list, one entry per layer:\n"
      "{}"
      "# If your list has extra entries (a lambda, a separate final norm), {}.\n"
      "{}"
      "from deepspeed.pipe import PipelineModule\n"
      "{}",
      kVersion, s.model.name, s.cluster.name, pc.gpus(), pc.tp, pc.pp, pc.dp, format_seconds(plan.metrics.step_time_s),
      format_bytes(plan.metrics.peak_memory_bytes), layer_list,
      method ? fmt::format("partition_method=\"{}\"\n# counts them and splits another list: give it pipewright's", method)
             : "shift the bounds in PARTS after them",
      tp_note, pc.tp > 1 ? "from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology\n" : "");
  const std::string make = fmt::format(
      "\n\ndef pipeline_module(layers, **kwargs):\n"
      "    return {}(layers=layers, {}, {}activation_checkpoint_interval={}, **kwargs)\n",
      method ? "PipelineModule" : "PipewrightPipelineModule", stages_arg,
      method ? fmt::format("partition_method=\"{}\", ", method) : "", full ? 1 : 0);
  if (method) {
    text += make;
  } else {
    text += fmt::format(
        "\n"
        "# Stage s builds layers PARTS[s] .. PARTS[s + 1] - 1. No partition_method takes bounds: this subclass sets\n"
        "# them where PipelineModule computes its own (_partition_layers).\n"
        "PARTS = [{}]\n"
        "\n"
        "\n"
        "class PipewrightPipelineModule(PipelineModule):\n"
        "    def _partition_layers(self, method=\"pipewright\"):\n"
        "        num_stages = self._topo.get_dim(\"pipe\")\n"
        "        if len(PARTS) != num_stages + 1 or PARTS[-1] != len(self._layer_specs):\n"
        "            raise RuntimeError(\n"
        "                f\"pipewright partition: {{len(PARTS) - 1}} stages over {{PARTS[-1]}} layers, but the module has \"\n"
        "                f\"{{num_stages}} stages and {{len(self._layer_specs)}} layers\"\n"
        "            )\n"
        "        self.parts = list(PARTS)\n"
        "        stage_id = self._topo.get_coord(self.global_rank).pipe\n"
        "        self._set_bounds(start=self.parts[stage_id], stop=self.parts[stage_id + 1])\n"
        "{}",
        fmt::join(parts, ", "), make);
  }
  files.push_back(ExportFile{"pipewright_partition.py", text});
  return files;
}

}  // namespace pw
