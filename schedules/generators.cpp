#include "schedules/generators.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

namespace {

struct Family {
  const char* name;
  Schedule (*build)(const ScheduleSpec&);
  bool chunked;  // uses --vpp chunks per rank
};

// Sorted by name: schedule_names() and the unknown-name message list them in this order.
constexpr Family kFamilies[] = {
    {"1f1b", make_1f1b, false},
    {"gpipe", make_gpipe, false},
    {"interleaved", make_interleaved, true},
    {"zb-h1", make_zb_h1, false},
};

const Family& find_family(const std::string& name) {
  for (const Family& f : kFamilies)
    if (name == f.name) return f;
  throw_bad_input("--schedule: unknown schedule '{}'; known: {}", name, fmt::join(schedule_names(), ", "));
}

}  // namespace

std::vector<std::string> schedule_names() {
  std::vector<std::string> names;
  for (const Family& f : kFamilies) names.emplace_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

int chunks_per_rank(const std::string& name, int vpp) { return find_family(name).chunked ? vpp : 1; }

Schedule empty_schedule(const ScheduleSpec& spec, int chunks) {
  Schedule s;
  s.name = spec.name;
  s.microbatches = spec.microbatches;
  s.placement = Placement::loop(spec.ranks, chunks);
  s.ranks.resize(static_cast<size_t>(spec.ranks));
  return s;
}

Schedule make_schedule(const ScheduleSpec& spec) {
  const Family& family = find_family(spec.name);
  if (spec.ranks < 1) throw_bad_input("--pp: needs at least 1 pipeline rank, got {}", spec.ranks);
  if (spec.microbatches < 1) throw_bad_input("--microbatches: needs at least 1 micro-batch, got {}", spec.microbatches);
  if (!family.chunked && spec.chunks != 1)
    throw_bad_input("--vpp: {} runs one chunk per rank, got {}; use --schedule interleaved for --vpp {}", spec.name,
                    spec.chunks, spec.chunks);
  if (!family.chunked && spec.group_size != 0)
    throw_bad_input("--group-size: only interleaved groups micro-batches; omit it for --schedule {}",
                    spec.name);
  if (spec.max_pending != 0 && spec.name != "zb-h1")
    throw_bad_input("--max-pending: only zb-h1 limits pending backward passes; omit it for --schedule {}", spec.name);
  return family.build(spec);
}

}  // namespace pw
