// `pipewright models` and `pipewright clusters`: the built-in catalogs.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>

#include "cli/commands.hpp"
#include "core/cluster.hpp"
#include "core/error.hpp"
#include "core/model.hpp"
#include "core/units.hpp"
#include "kernels/installed_tables.hpp"
#include "profiler/profile.hpp"
#include "profiler/profiled_model.hpp"

namespace pw {

CommandRunner add_models_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("models", "List the built-in model presets");
  auto json_out = std::make_shared<bool>(false);
  auto show = std::make_shared<std::string>();
  auto profile_keys = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json_out, "Print JSON");
  auto* show_option = cmd->add_option("--show", *show,
                  "Print one model (preset or file) in pipewright's model JSON form, with its total and active "
                  "(per token: top-k of the routed experts) parameter counts");
  cmd->add_flag("--profile-keys", *profile_keys,
                "With --show: what a profile of the model is keyed by instead (docs/profile-format.md): the "
                "profile's \"model\" object and each layer's kind and shape")
      ->needs(show_option);
  return [json_out, show, profile_keys](std::ostream& out) {
    if (*profile_keys) {
      // What a profile written elsewhere (pipewright.torch.profile) must say for plan --profile to find it.
      const Model m = load_model(*show);
      const std::optional<ProfiledModel> profiled = profiled_model_of(m);
      if (!profiled)
        throw_bad_input("--profile-keys: '{}' has explicit per-layer costs, which no profile entry replaces; "
                        "give a transformer model",
                        m.name);
      nlohmann::ordered_json layers = nlohmann::ordered_json::array();
      for (const Layer& l : m.layers)
        layers.push_back({{"name", l.name},
                          {"kind", profile_kind(*m.transformer, l)},
                          {"shape", layer_shape(*m.transformer, l)}});
      out << nlohmann::ordered_json{{"model", profiled_model_json(*profiled)}, {"layers", layers}}.dump(2) << "\n";
      return;
    }
    if (!show->empty()) {
      // The parameter count next to the name, so that a user sees what was read (a config.json's shape).
      const Model m = load_model(*show);
      const nlohmann::ordered_json shown = nlohmann::ordered_json::parse(model_to_json_text(m));
      nlohmann::ordered_json j;
      for (const auto& [key, value] : shown.items()) {
        j[key] = value;
        if (key != "name") continue;
        j["total_parameters"] = static_cast<std::int64_t>(std::llround(parameter_count(m)));
        j["active_parameters"] = static_cast<std::int64_t>(std::llround(active_parameter_count(m)));
      }
      out << j.dump(2) << "\n";
      return;
    }
    nlohmann::json list = nlohmann::json::array();
    size_t width = 5;  // "model"
    for (const std::string& name : model_preset_names()) width = std::max(width, name.size());
    if (!*json_out)
      out << fmt::format("{:<{}} {:>10} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>8} {:>12}\n", "model", width, "parameters",
                         "active", "layers", "hidden", "heads", "kv heads", "ffn", "seq-len", "experts");
    for (const std::string& name : model_preset_names()) {
      const Model m = model_preset(name);
      const TransformerConfig& t = *m.transformer;
      const double params = parameter_count(m);
      const double active = active_parameter_count(m);
      if (*json_out) {
        nlohmann::json entry = {{"name", name},         {"parameters", params},     {"active_parameters", active},
                                {"layers", t.layers},   {"hidden", t.hidden},       {"heads", t.heads},
                                {"kv_heads", t.kv_heads}, {"ffn", t.ffn},           {"vocab", t.vocab},
                                {"seq_len", t.max_seq_len}};
        if (t.moe) entry["experts"] = {{"routed", t.moe->experts}, {"top_k", t.moe->top_k}, {"ffn", t.moe->expert_ffn}};
        list.push_back(entry);
      } else {
        const std::string experts = t.moe ? fmt::format("{} top {}", t.moe->experts, t.moe->top_k) : "-";
        out << fmt::format("{:<{}} {:>9.2f}B {:>8.2f}B {:>7} {:>7} {:>6} {:>9} {:>7} {:>8} {:>12}\n", name, width,
                           params / 1e9, active / 1e9, t.layers, t.hidden, t.heads, t.kv_heads, t.ffn, t.max_seq_len,
                           experts);
      }
    }
    if (*json_out) out << nlohmann::json{{"models", list}}.dump(2) << "\n";
  };
}

CommandRunner add_clusters_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("clusters", "List the built-in cluster presets");
  auto json_out = std::make_shared<bool>(false);
  auto show = std::make_shared<std::string>();
  cmd->add_flag("--json", *json_out, "Print JSON");
  cmd->add_option("--show", *show, "Print one cluster (preset or file) in pipewright's cluster JSON form");
  return [json_out, show](std::ostream& out) {
    if (!show->empty()) {
      out << cluster_to_json_text(load_cluster(*show)) << "\n";
      return;
    }
    nlohmann::json list = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows{
        {"cluster", "GPU", "GPUs/node", "memory", "peak bf16", "peak fp8", "HBM", "intra-node", "inter-node",
         "kernel tables"}};
    for (const std::string& name : cluster_preset_names()) {
      const Cluster c = cluster_preset(name);
      if (*json_out) {
        list.push_back(nlohmann::json::parse(cluster_to_json_text(c)));
        continue;
      }
      const auto peak = [](double flops) { return flops > 0 ? fmt::format("{:.0f} TF/s", flops / 1e12) : std::string("-"); };
      // The installed tables --kernels installed would price it with (the folder's name), or "-".
      const std::string installed = c.ideal ? "" : installed_tables_for(c.gpu);
      const std::string tables = installed.empty() ? "-" : std::filesystem::path(installed).filename().string();
      if (c.ideal)
        rows.push_back({name, c.gpu.name, "any", "no limit", peak(c.gpu.peak_flops), peak(c.gpu.fp8_peak_flops), "-",
                        "free", "free", tables});
      else
        rows.push_back({name, c.gpu.name, std::to_string(c.gpus_per_node), format_bytes(c.gpu.memory_bytes),
                        peak(c.gpu.peak_flops), peak(c.gpu.fp8_peak_flops), format_rate(c.gpu.hbm_bytes_per_s),
                        format_rate(c.intra_node.bandwidth_bytes_per_s), format_rate(c.inter_node.bandwidth_bytes_per_s),
                        tables});
    }
    if (!*json_out) {
      // The first two columns left-aligned, the figures right-aligned, each as wide as its widest cell.
      std::vector<size_t> width(rows.front().size(), 0);
      for (const auto& r : rows)
        for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
      for (const auto& r : rows) {
        std::string line;
        for (size_t i = 0; i < r.size(); ++i)
          line += i < 2 ? fmt::format("{:<{}}  ", r[i], width[i]) : fmt::format("{:>{}}  ", r[i], width[i]);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out << line << "\n";
      }
    }
    if (*json_out) out << nlohmann::json{{"clusters", list}}.dump(2) << "\n";
  };
}

}  // namespace pw
