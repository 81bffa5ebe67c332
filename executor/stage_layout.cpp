#include "executor/stage_layout.hpp"

#include "core/error.hpp"

namespace pw {

int checked_seq_len(const Model& model, int micro_batch_size, int seq_len) {
  const TransformerConfig& c = *model.transformer;
  if (seq_len == 0) seq_len = c.max_seq_len;
  if (micro_batch_size < 1) throw_bad_input("--micro-batch-size: must be at least 1, got {}", micro_batch_size);
  if (seq_len < 1) throw_bad_input("--seq-len: must be at least 1, got {}", seq_len);
  if (c.learned_positions && seq_len > c.max_seq_len)
    throw_bad_input("--seq-len: {} exceeds the {} learned positions of '{}'; use --seq-len {} or less", seq_len,
                    c.max_seq_len, model.name, c.max_seq_len);
  return seq_len;
}

void check_stage_layers(const Model& model, const std::vector<LayerRange>& stage_layers) {
  int next = 0;
  for (const LayerRange& r : stage_layers) {
    if (r.first != next || r.last < r.first) throw_bad_input("layer ranges: they must be contiguous and non-empty");
    next = r.last + 1;
  }
  if (next != model.num_layers())
    throw_bad_input("layer ranges: they cover {} of the {} layers of '{}'", next, model.num_layers(), model.name);
}

}  // namespace pw
