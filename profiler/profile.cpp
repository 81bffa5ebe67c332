#include "profiler/profile.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/excerpt.hpp"
#include "core/json_text.hpp"
#include "core/units.hpp"

namespace pw {

const LayerProfile* Profile::find(const std::string& kind, const std::string& shape, int micro_batch_size,
                                  int seq_len) const {
  for (const LayerProfile& l : layers)
    if (l.kind == kind && l.shape == shape && l.micro_batch_size == micro_batch_size && l.seq_len == seq_len) return &l;
  return nullptr;
}

std::string layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::Embedding: return "embedding";
    case LayerKind::Block: return "block";
    case LayerKind::Head: return "head";
    case LayerKind::Mtp: return "mtp";
    case LayerKind::Explicit: break;
  }
  throw_bad_input("explicit layers carry their own costs and have no profile; use a transformer model");
}

std::string layer_shape(const TransformerConfig& c, LayerKind kind) {
  const char* norm = c.norm == NormKind::RmsNorm ? "rmsnorm" : "layernorm";
  const char* positions = c.learned_positions ? "learned" : "rotary";
  switch (kind) {
    case LayerKind::Embedding: return fmt::format("hidden={} vocab={} positions={}", c.hidden, c.vocab, positions);
    case LayerKind::Head: return fmt::format("hidden={} vocab={} norm={}", c.hidden, c.vocab, norm);
    case LayerKind::Block:
      return fmt::format("hidden={} heads={} kv_heads={} head_dim={} ffn={} mlp={} norm={} bias={} positions={}{}",
                         c.hidden, c.heads, c.kv_heads, c.head_dim, c.ffn, to_string(c.mlp),
                         norm, c.bias ? "all" : c.qkv_bias ? "qkv" : "none", positions, c.mla ? " mla=1" : "");
    // No backend measures these yet: the shape names them so that no dense block's profile stands in.
    case LayerKind::Mtp:
      return fmt::format("hidden={} heads={} mtp experts={}", c.hidden, c.heads, c.moe ? c.moe->experts : 0);
    case LayerKind::Explicit: break;
  }
  return layer_kind_name(kind);
}

std::string profile_kind(const TransformerConfig& c, const Layer& layer) {
  if (layer.kind == LayerKind::Block && c.moe_block(layer.block)) return "moe-block";
  return layer_kind_name(layer.kind);
}

std::string layer_shape(const TransformerConfig& c, const Layer& layer) {
  const std::string shape = layer_shape(c, layer.kind);
  if (layer.kind != LayerKind::Block || !c.moe_block(layer.block)) return shape;
  const MoeConfig& m = *c.moe;
  return fmt::format("{} experts={} top_k={} expert_ffn={} shared_ffn={} shared_gate={} expert_bias={}{}", shape, m.experts,
                     m.top_k, m.expert_ffn, m.shared_expert_ffn, m.shared_expert_gate ? 1 : 0, m.expert_bias ? 1 : 0,
                     m.router_score_bias ? " score_bias=1" : "");
}

namespace {

using nlohmann::ordered_json;

ordered_json timing_json(const PhaseTiming& t) {
  return {{"median_s", t.median_s}, {"p10_s", t.p10_s}, {"p90_s", t.p90_s}, {"repetitions", t.repetitions}};
}

PhaseTiming read_timing(const JsonFields& f) {
  f.reject_unknown({"median_s", "p10_s", "p90_s", "repetitions"});
  PhaseTiming t;
  t.median_s = f.figure("median_s", kSecondsRange);
  t.p10_s = f.figure("p10_s", kSecondsRange, t.median_s);
  t.p90_s = f.figure("p90_s", kSecondsRange, t.median_s);
  const long repetitions = f.non_negative_integer("repetitions");  // 0: a timing written by hand
  if (repetitions > kMaxRepetitions) f.count("repetitions", kMaxRepetitions, "repetitions");
  t.repetitions = static_cast<int>(repetitions);
  return t;
}

}  // namespace

std::string link_fit_text(const LinkProfile& link) {
  std::string text = fmt::format("fit: latency {} + size / {}", format_seconds(link.latency_s),
                                 format_rate(link.bandwidth_bytes_per_s));
  if (link.bandwidth_bounded)
    text += " (at least: the time did not grow with the size, so the latency is the mean time; measure again with "
            "more --link-repetitions on a quieter machine for a fit)";
  return text;
}

std::string profile_to_json_text(const Profile& p) {
  ordered_json j;
  j["format"] = "pipewright-profile";
  j["version"] = 1;
  j["tool"] = p.tool;
  j["machine"] = {{"backend", p.machine.backend},
                  {"device", p.machine.device},
                  {"cores", p.machine.cores},
                  {"threads_per_rank", p.machine.threads_per_rank},
                  {"wakeup_s", p.machine.wakeup_s}};
  if (p.machine.handover_s > 0) j["machine"]["handover_s"] = p.machine.handover_s;
  if (p.model) j["model"] = profiled_model_json(*p.model);
  ordered_json layers = ordered_json::array();
  for (const LayerProfile& l : p.layers) {
    ordered_json e = {{"kind", l.kind},
                      {"shape", l.shape},
                      {"micro_batch_size", l.micro_batch_size},
                      {"seq_len", l.seq_len},
                      {"forward", timing_json(l.forward)},
                      {"backward_input", timing_json(l.backward_input)},
                      {"backward_weight", timing_json(l.backward_weight)}};
    if (l.selective_recompute) e["selective_recompute"] = timing_json(*l.selective_recompute);
    if (l.backward) e["backward"] = timing_json(*l.backward);
    e["activation_bytes"] = l.activation_bytes;
    e["weight_grad_bytes"] = l.weight_grad_bytes;
    e["output_bytes"] = l.output_bytes;
    layers.push_back(e);
  }
  j["layers"] = layers;
  ordered_json links = ordered_json::array();
  for (const LinkProfile& l : p.links) {
    ordered_json samples = ordered_json::array();
    for (const LinkSample& s : l.samples) samples.push_back({{"bytes", s.bytes}, {"time_s", s.time_s}});
    links.push_back({{"src", l.src},
                     {"dst", l.dst},
                     {"latency_s", l.latency_s},
                     {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                     {"samples", samples}});
  }
  j["links"] = links;
  if (!p.collectives.empty()) {
    ordered_json collectives = ordered_json::array();
    for (const CollectiveProfile& c : p.collectives)
      collectives.push_back({{"kind", collective_name(c.kind)},
                             {"ranks", c.ranks},
                             {"bytes", c.bytes},
                             {"time_s", c.time_s},
                             {"link", {{"bandwidth_bytes_per_s", c.link.bandwidth_bytes_per_s}, {"latency_s", c.link.latency_s}}}});
    j["collectives"] = collectives;
  }
  j["optimizer_s_per_parameter"] = p.optimizer_s_per_parameter;
  if (p.serving) j["serving"] = serving_profile_json(*p.serving);
  if (p.runtime)
    j["runtime"] = {{"name", p.runtime->name}, {"action_s", p.runtime->action_s}, {"transfer_s", p.runtime->transfer_s}};
  return json_file_text(j, "profile");
}

// A runtime's fixed time per compute call or transfer: microseconds in practice, a second at most.
constexpr FigureRange kRuntimeActionRange{0, 1, "s"};

Profile profile_from_json_text(const std::string& text, const std::string& source) {
  const nlohmann::json j = parse_json_text(text, source);
  const JsonFields top(j, source);
  top.reject_unknown({"format", "version", "tool", "machine", "model", "layers", "links", "collectives", "optimizer_s_per_parameter",
                    "serving", "runtime"});
  if (top.string("format") != "pipewright-profile")
    top.fail("format", "must be \"pipewright-profile\"; is this a profile written by `pipewright profile`?");
  if (top.positive_integer("version") != 1) top.fail("version", "must be 1, the only version this pipewright reads");
  Profile p;
  p.tool = top.optional_string("tool").value_or("");
  if (top.has("machine")) {
    const JsonFields m = top.object("machine");
    m.reject_unknown({"backend", "device", "cores", "threads_per_rank", "wakeup_s", "handover_s"});
    p.machine.backend = m.optional_string("backend").value_or("");
    p.machine.device = m.optional_string("device").value_or("");
    p.machine.cores = m.has("cores") ? static_cast<int>(m.non_negative_integer("cores")) : 0;
    p.machine.threads_per_rank = m.has("threads_per_rank") ? m.positive_int("threads_per_rank") : 1;
    p.machine.wakeup_s = m.figure("wakeup_s", kSecondsRange, 0.0);
    p.machine.handover_s = m.figure("handover_s", kSecondsRange, 0.0);
  }
  if (top.has("model")) p.model = profiled_model_from_json(top.object("model"));
  const nlohmann::json& layers = top.array("layers", kMaxProfileEntries, "layer entries");
  for (size_t i = 0; i < layers.size(); ++i) {
    const JsonFields f(layers[i], source, fmt::format("layers[{}].", i));
    f.reject_unknown({"kind", "shape", "micro_batch_size", "seq_len", "forward", "backward_input", "backward_weight",
                      "selective_recompute", "backward", "activation_bytes", "weight_grad_bytes", "output_bytes"});
    LayerProfile l;
    l.kind = f.string("kind");
    if (l.kind != "embedding" && l.kind != "block" && l.kind != "moe-block" && l.kind != "head")
      f.fail("kind", fmt::format("must be \"embedding\", \"block\", \"moe-block\" or \"head\", got \"{}\"", excerpt(l.kind)));
    l.shape = f.string("shape");
    l.micro_batch_size = f.positive_int("micro_batch_size");
    l.seq_len = f.positive_int("seq_len");
    l.forward = read_timing(f.object("forward"));
    l.backward_input = read_timing(f.object("backward_input"));
    l.backward_weight = read_timing(f.object("backward_weight"));
    if (f.has("selective_recompute")) l.selective_recompute = read_timing(f.object("selective_recompute"));
    if (f.has("backward")) l.backward = read_timing(f.object("backward"));
    l.activation_bytes = f.figure("activation_bytes", kBytesRange, 0.0);
    l.weight_grad_bytes = f.figure("weight_grad_bytes", kBytesRange, 0.0);
    l.output_bytes = f.figure("output_bytes", kBytesRange, 0.0);
    p.layers.push_back(l);
  }
  if (top.has("links")) {
    const nlohmann::json& links = top.array("links", kMaxProfileEntries, "link entries");
    for (size_t i = 0; i < links.size(); ++i) {
      const JsonFields f(links[i], source, fmt::format("links[{}].", i));
      f.reject_unknown({"src", "dst", "latency_s", "bandwidth_bytes_per_s", "samples"});
      LinkProfile l;
      l.src = static_cast<int>(f.non_negative_integer("src"));
      l.dst = static_cast<int>(f.non_negative_integer("dst"));
      l.latency_s = f.figure("latency_s", kSecondsRange);
      l.bandwidth_bytes_per_s = f.figure("bandwidth_bytes_per_s", kBandwidthRange);
      if (f.has("samples")) {
        const nlohmann::json& samples = f.array("samples", kMaxProfileEntries, "{\"bytes\", \"time_s\"} samples");
        for (size_t k = 0; k < samples.size(); ++k) {
          const JsonFields s(samples[k], source, fmt::format("links[{}].samples[{}].", i, k));
          s.reject_unknown({"bytes", "time_s"});
          l.samples.push_back({s.figure("bytes", kBytesRange), s.figure("time_s", kSecondsRange)});
        }
      }
      p.links.push_back(l);
    }
  }
  if (top.has("collectives")) {
    const nlohmann::json& collectives = top.array("collectives", kMaxProfileEntries, "collective entries");
    for (size_t i = 0; i < collectives.size(); ++i) {
      const JsonFields f(collectives[i], source, fmt::format("collectives[{}].", i));
      f.reject_unknown({"kind", "ranks", "bytes", "time_s", "link"});
      CollectiveProfile c;
      const std::string kind = f.string("kind");
      if (!collective_from_name(kind, c.kind))
        f.fail("kind", fmt::format("is \"{}\"; give \"all_reduce\", \"all_gather\" or \"reduce_scatter\"", excerpt(kind)));
      c.ranks = f.positive_int("ranks");
      if (c.ranks < 2) f.fail("ranks", fmt::format("is {}; a collective needs 2 GPUs or more", c.ranks));
      c.bytes = f.positive_figure("bytes", kBytesRange);
      c.time_s = f.positive_figure("time_s", kSecondsRange);
      const JsonFields link = f.object("link");
      link.reject_unknown({"bandwidth_bytes_per_s", "latency_s"});
      c.link.bandwidth_bytes_per_s = link.figure("bandwidth_bytes_per_s", kBandwidthRange);
      c.link.latency_s = link.figure("latency_s", kSecondsRange);
      p.collectives.push_back(c);
    }
  }
  p.optimizer_s_per_parameter = top.figure("optimizer_s_per_parameter", kSecondsRange, 0.0);
  if (top.has("serving")) p.serving = serving_profile_from_json(top.object("serving"));
  if (top.has("runtime")) {
    const JsonFields r = top.object("runtime");
    r.reject_unknown({"name", "action_s", "transfer_s"});
    p.runtime = RuntimeProfile{r.string("name"), r.figure("action_s", kRuntimeActionRange),
                               r.figure("transfer_s", kRuntimeActionRange, 0.0)};
  }
  return p;
}

Profile load_profile(const std::string& path) {
  return profile_from_json_text(read_text_file(path, "profile"), path);
}

}  // namespace pw
