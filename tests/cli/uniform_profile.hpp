#pragma once
// A profile of tiny-llama at micro-batch 1 x 32 tokens with round numbers: every block F = 1 ms, B = 2 ms,
// W = 3 ms; embedding, head and the optimizer free; measured by "test" on a "test CPU", recording tiny-llama as
// its model.
#include <fstream>
#include <string>

#include "cli_test_util.hpp"
#include "core/model.hpp"
#include "profiler/profile.hpp"

inline pw::Profile uniform_block_profile() {
  const pw::Model model = pw::load_model(source_path("examples/tiny-llama.json"));
  pw::Profile p;
  p.tool = "test";
  p.machine = pw::MachineInfo{"cpu", "test CPU", 2, 1};
  p.model = pw::profiled_model_of(model);
  for (pw::LayerKind k : {pw::LayerKind::Embedding, pw::LayerKind::Block, pw::LayerKind::Head}) {
    pw::LayerProfile l;
    l.kind = pw::layer_kind_name(k);
    l.shape = pw::layer_shape(*model.transformer, k);
    l.seq_len = 32;
    const double scale = k == pw::LayerKind::Block ? 1e-3 : 0;
    l.forward.median_s = scale;
    l.backward_input.median_s = 2 * scale;
    l.backward_weight.median_s = 3 * scale;
    p.layers.push_back(l);
  }
  p.optimizer_s_per_parameter = 1e-15;
  return p;
}

// Writes it to `path` and returns the path.
inline std::string write_uniform_block_profile(const std::string& path) {
  std::ofstream(path) << pw::profile_to_json_text(uniform_block_profile());
  return path;
}
