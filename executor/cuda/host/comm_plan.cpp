#include "executor/cuda/host/comm_plan.hpp"

#include "core/error.hpp"

namespace pw {

CommPlan::CommPlan(const Schedule& lowered) {
  if (!lowered.lowered) throw_bad_input("schedule {}: the NCCL transport needs a lowered schedule (lower() it first)", lowered.name);
  std::map<std::pair<int, int>, std::vector<MessageKey>> sends;
  for (int r = 0; r < lowered.num_ranks(); ++r)
    for (const Action& a : lowered.ranks[static_cast<size_t>(r)]) {
      if (a.op != Op::SendF && a.op != Op::SendB) continue;
      const int dst = lowered.placement.rank_of(a.op == Op::SendF ? a.stage + 1 : a.stage - 1);
      sends[{r, dst}].push_back(MessageKey{0, a.op, a.stage, a.microbatch});
    }
  for (auto& [pair, messages] : sends) {
    by_pair_[pair] = static_cast<int>(channels_.size());
    std::map<std::tuple<Op, int, int>, int> index;
    for (size_t i = 0; i < messages.size(); ++i)
      index[{messages[i].op, messages[i].stage, messages[i].microbatch}] = static_cast<int>(i);
    positions_.push_back(std::move(index));
    channels_.push_back(Channel{pair.first, pair.second, std::move(messages)});
  }
}

int CommPlan::channel_of(int src, int dst) const {
  auto it = by_pair_.find({src, dst});
  return it == by_pair_.end() ? -1 : it->second;
}

int CommPlan::position(int channel, const MessageKey& key) const {
  const auto& index = positions_.at(static_cast<size_t>(channel));
  auto it = index.find({key.op, key.stage, key.microbatch});
  if (it == index.end())
    throw_runtime("channel rank {} -> rank {} carries no {} of stage {} micro-batch {}", channels_[static_cast<size_t>(channel)].src,
                  channels_[static_cast<size_t>(channel)].dst, to_string(key.op), key.stage, key.microbatch);
  return it->second;
}

std::vector<int> CommPlan::channels_of(int rank) const {
  std::vector<int> out;
  for (size_t c = 0; c < channels_.size(); ++c)
    if (channels_[c].src == rank || channels_[c].dst == rank) out.push_back(static_cast<int>(c));
  return out;
}

ReceiveCursor::Range ReceiveCursor::post_through(int iteration, int position) {
  const long wanted = static_cast<long>(iteration) * per_iteration_ + position;
  Range r{next_, wanted};
  if (wanted >= next_) next_ = wanted + 1;
  return r;
}

}  // namespace pw
