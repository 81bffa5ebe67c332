#include "core/recompute_modules.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <utility>

#include "core/error.hpp"

namespace pw {
namespace {

constexpr std::array<std::pair<const char*, RecomputeModule>, 7> kModules{{
    {"core_attn", RecomputeModule::CoreAttn},
    {"moe_act", RecomputeModule::MoeAct},
    {"layernorm", RecomputeModule::Layernorm},
    {"mla_up_proj", RecomputeModule::MlaUpProj},
    {"mlp", RecomputeModule::Mlp},
    {"shared_experts", RecomputeModule::SharedExperts},
    {"elementwise", RecomputeModule::Elementwise},
}};

// "core_attn, moe_act, ... or elementwise": the table's names, for the errors.
std::string choices() {
  std::string out;
  for (size_t i = 0; i < kModules.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == kModules.size() ? " or " : ", ") + kModules[i].first;
  return out;
}

}  // namespace

RecomputeModules recompute_modules_from_string(const std::string& text) {
  RecomputeModules out{0};
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find_first_of(", ", start);
    const std::string name = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() + 1 : end + 1;
    if (name.empty()) continue;
    bool known = false;
    for (const auto& [module_name, module] : kModules)
      if (name == module_name) {
        out.bits |= static_cast<unsigned>(module);
        known = true;
      }
    if (known) continue;
    // Megatron's other modules: the whole MoE layer (its all-to-alls rerun too) and the GatedDeltaNet and
    // hyper-connection parts of architectures pipewright has no block for.
    if (name == "moe" || name == "gdn_norm_out" || name == "gdp_in_proj" || name == "gdp_qkv" || name == "mhc")
      throw_bad_input("--recompute-modules: {} is a Megatron module pipewright does not model; give {}", name, choices());
    throw_bad_input("--recompute-modules: '{}' is not a module; give {}", name, choices());
  }
  if (out.bits == 0) throw_bad_input("--recompute-modules: the list is empty; give {}", choices());
  return out;
}

std::vector<std::string> module_names(RecomputeModules m) {
  std::vector<std::string> names;
  for (const auto& [name, module] : kModules)
    if (m.has(module)) names.emplace_back(name);
  return names;
}

std::string to_string(RecomputeModules m) { return fmt::format("{}", fmt::join(module_names(m), ",")); }

}  // namespace pw
