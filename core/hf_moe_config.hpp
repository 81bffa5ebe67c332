#pragma once
// The mixture-of-experts part of reading a Hugging Face config.json (core/hf_config.cpp reads the rest).
#include <string>

#include "core/json_text.hpp"
#include "core/model.hpp"

namespace pw::detail {

// Whether `type` is one of the MoE model types read_hf_moe knows.
bool hf_moe_type(const std::string& type);
// Fills the experts (and DeepSeek's latent attention and MTP modules) of `c`, whose dense fields
// (hidden, layers, heads, ffn = intermediate_size, ...) are read already.
void read_hf_moe(const JsonFields& f, const std::string& type, TransformerConfig& c);

}  // namespace pw::detail
