// The Megatron-LM export is a launch: every flag it writes is one Megatron-LM accepts, the rules its
// argument validation sets hold, and the run it configures is the simulated one, field by field.
//   Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22): the accepted flags in
//   tests/fixtures/megatron/arguments.txt (tests/fixtures/megatron/list_arguments.py reads them from
//   megatron/training/arguments.py and the config dataclasses it builds flags from); validate_args
//   (megatron/training/arguments.py): world size a multiple of tp x pp x cp (L424-446), kv_channels
//   hidden / heads unless given (L1331), seq-length a multiple of 2 x cp (L1335), max-position-embeddings
//   >= seq-length (L1353), --overlap-param-gather with the distributed optimizer and --overlap-grad-reduce
//   (L1024-1029); TransformerConfig.__post_init__ (megatron/core/transformer/transformer_config.py):
//   heads and query groups multiples of tp (L1446, L1462).
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/model.hpp"
#include "exports/megatron.hpp"
#include "../planner/planned.hpp"

using namespace pw;

namespace {

std::set<std::string> megatron_flags() {
  std::ifstream in(std::string(PIPEWRIGHT_SOURCE_DIR) + "/tests/fixtures/megatron/arguments.txt");
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("--", 0) == 0) flags.insert(line);
  return flags;
}

// Flag -> its values ("" for a switch), as argparse reads the list.
std::map<std::string, std::vector<std::string>> parsed(const std::vector<std::string>& args) {
  std::map<std::string, std::vector<std::string>> out;
  std::string flag;
  for (const std::string& a : args) {
    if (a.rfind("--", 0) == 0) {
      flag = a;
      REQUIRE(out.count(flag) == 0);  // argparse keeps the last: a repeated flag would hide the first
      out[flag];
    } else {
      out[flag].push_back(a);
    }
  }
  return out;
}

int number(const std::map<std::string, std::vector<std::string>>& a, const std::string& flag, int fallback) {
  const auto it = a.find(flag);
  return it == a.end() ? fallback : std::stoi(it->second.at(0));
}

Evaluation plan_of(const std::string& model, int tp, int pp, int dp, int ep, int cp, int global_batch, Precision precision,
                   Workload::Dispatcher dispatcher, Recompute recompute) {
  Scenario s = test::preset_scenario(model, tp, pp, dp, ep, global_batch);
  s.parallel.cp = cp;
  s.workload.precision = precision;
  s.workload.dispatcher = dispatcher;
  s.workload.recompute = recompute;
  return test::planned(s);
}

struct Case {
  const char* name;
  Evaluation plan;
};

std::vector<Case> cases() {
  using D = Workload::Dispatcher;
  return {{"llama3-70b, tp 8 cp 2", plan_of("llama3-70b", 8, 4, 2, 1, 2, 64, Precision::Bf16, D::AllToAll, Recompute::Selective)},
          {"gpt3-175b, learned positions and biases", plan_of("gpt3-175b", 8, 8, 4, 1, 1, 64, Precision::Bf16, D::AllToAll, Recompute::Full)},
          {"deepseek-v3, fp8, flex", plan_of("deepseek-v3", 1, 1, 64, 64, 1, 128, Precision::Fp8, D::Flex, Recompute::None)},
          {"gpt-oss-120b, sinks and windows", plan_of("gpt-oss-120b", 4, 2, 4, 8, 1, 64, Precision::Bf16, D::AllToAll, Recompute::None)},
          {"qwen3-30b-a3b, query and key norms", plan_of("qwen3-30b-a3b", 4, 2, 4, 4, 1, 64, Precision::Bf16, D::AllToAll, Recompute::None)}};
}

}  // namespace

TEST_CASE("every flag of the Megatron-LM export is one Megatron-LM's arguments.py accepts") {
  const std::set<std::string> accepted = megatron_flags();
  REQUIRE(accepted.size() > 500);
  REQUIRE(accepted.count("--tensor-model-parallel-size") == 1);
  for (const Case& c : cases()) {
    INFO(c.name);
    for (const auto& [flag, values] : parsed(megatron_arguments(c.plan))) {
      INFO(flag);
      CHECK(accepted.count(flag) == 1);
    }
  }
}

TEST_CASE("the Megatron-LM export keeps the rules Megatron-LM's argument validation sets") {
  for (const Case& c : cases()) {
    INFO(c.name);
    const auto a = parsed(megatron_arguments(c.plan));
    const ParallelConfig& pc = c.plan.scenario.parallel;
    const int tp = number(a, "--tensor-model-parallel-size", 1), pp = number(a, "--pipeline-model-parallel-size", 1),
              cp = number(a, "--context-parallel-size", 1);
    CHECK(pc.gpus() % (tp * pp * cp) == 0);
    const int heads = number(a, "--num-attention-heads", 0), hidden = number(a, "--hidden-size", 0);
    CHECK(heads % tp == 0);
    CHECK(number(a, "--num-query-groups", heads) % tp == 0);
    if (!a.count("--kv-channels") && !a.count("--multi-latent-attention")) CHECK(hidden % heads == 0);
    const int seq = number(a, "--seq-length", 0);
    if (cp > 1) CHECK(seq % (2 * cp) == 0);
    CHECK(number(a, "--max-position-embeddings", 0) >= seq);
    if (a.count("--overlap-param-gather")) {
      CHECK(a.count("--use-distributed-optimizer") == 1);
      CHECK(a.count("--overlap-grad-reduce") == 1);
    }
  }
}

TEST_CASE("the run the Megatron-LM export configures is the simulated one, field by field") {
  for (const Case& c : cases()) {
    INFO(c.name);
    const auto a = parsed(megatron_arguments(c.plan));
    const Scenario& s = c.plan.scenario;
    const ParallelConfig& pc = s.parallel;
    const TransformerConfig& m = *s.model.transformer;
    CHECK(number(a, "--tensor-model-parallel-size", 1) == pc.tp);
    CHECK(number(a, "--pipeline-model-parallel-size", 1) == pc.pp);
    CHECK(number(a, "--context-parallel-size", 1) == pc.cp);
    CHECK(number(a, "--expert-model-parallel-size", 1) == pc.ep);
    CHECK(number(a, "--num-layers", 0) == m.layers);
    CHECK(number(a, "--hidden-size", 0) == m.hidden);
    CHECK(number(a, "--num-attention-heads", 0) == m.heads);
    CHECK(number(a, "--ffn-hidden-size", 0) == m.ffn);
    if (!m.mla) {
      CHECK(number(a, "--num-query-groups", m.heads) == m.kv_heads);
      CHECK(number(a, "--kv-channels", m.hidden / m.heads) == m.head_dim);
    }
    CHECK(number(a, "--seq-length", 0) == s.workload.seq_len);
    CHECK(number(a, "--micro-batch-size", 0) == s.workload.micro_batch_size);
    CHECK(number(a, "--global-batch-size", 0) == s.global_batch_size);
    CHECK(a.count("--bf16") == 1);
    CHECK(a.count("--fp8-format") == (s.workload.precision == Precision::Fp8 ? 1u : 0u));
    CHECK(a.at("--position-embedding-type").at(0) == (m.learned_positions ? "learned_absolute" : "rope"));
    CHECK(a.at("--normalization").at(0) == (m.norm == NormKind::RmsNorm ? "RMSNorm" : "LayerNorm"));
    CHECK(a.count("--untie-embeddings-and-output-weights") == (m.tied_embeddings ? 0u : 1u));
    CHECK(a.count("--disable-bias-linear") == (m.bias ? 0u : 1u));
    CHECK(a.count("--qk-layernorm") == (m.qk_norm ? 1u : 0u));
    CHECK(a.count("--attention-dropout") == (m.dropout ? 0u : 1u));
    const char* granularity = s.workload.recompute == Recompute::Full        ? "full"
                              : s.workload.recompute == Recompute::Selective ? "selective"
                                                                             : "";
    CHECK((a.count("--recompute-granularity") ? a.at("--recompute-granularity").at(0) : "") == granularity);
    if (m.attention_window > 0) CHECK(a.at("--window-size").at(0) == std::to_string(m.attention_window - 1) + ",0");
    CHECK(a.count("--softmax-type") == (m.attention_sinks ? 1u : 0u));
    if (!m.moe) {
      CHECK(a.count("--num-experts") == 0);
      continue;
    }
    CHECK(number(a, "--num-experts", 0) == m.moe->experts);
    CHECK(number(a, "--moe-router-topk", 0) == m.moe->top_k);
    CHECK(number(a, "--moe-ffn-hidden-size", 0) == m.moe->expert_ffn);
    CHECK(number(a, "--moe-router-num-groups", 0) == m.moe->groups);
    CHECK(number(a, "--moe-router-group-topk", 0) == m.moe->top_groups);
    CHECK(a.at("--moe-token-dispatcher-type").at(0) == to_string(s.workload.dispatcher));
    CHECK(a.count("--moe-flex-dispatcher-backend") == (s.workload.dispatcher == Workload::Dispatcher::Flex ? 1u : 0u));
  }
}

TEST_CASE("DeepSeek-V3's Megatron-LM export routes as its report: 8 groups, the best 4, scaled by 2.5, through DeepEP") {
  const auto a = parsed(megatron_arguments(cases()[2].plan));
  CHECK(a.at("--moe-router-num-groups") == std::vector<std::string>{"8"});
  CHECK(a.at("--moe-router-group-topk") == std::vector<std::string>{"4"});
  CHECK(a.at("--moe-router-topk-scaling-factor") == std::vector<std::string>{"2.5"});
  CHECK(a.at("--moe-router-score-function") == std::vector<std::string>{"sigmoid"});
  CHECK(a.at("--moe-token-dispatcher-type") == std::vector<std::string>{"flex"});
  CHECK(a.at("--moe-flex-dispatcher-backend") == std::vector<std::string>{"deepep"});
  CHECK(a.at("--fp8-format") == std::vector<std::string>{"hybrid"});
}
