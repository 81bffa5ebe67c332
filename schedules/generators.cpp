#include "schedules/generators.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

namespace {

enum class Chunks {
  One,  // one stage per rank
  Vpp,  // --vpp stages per rank, loop placement
  Two,  // two stages per rank in V order
};

struct Family {
  const char* name;
  Schedule (*build)(const ScheduleSpec&);
  Chunks chunks;
  bool order_from_costs = false;  // the order is searched on the stage costs (ScheduleSpec.stage_f, ...)
  int copies = 1;                 // copies of the model the ranks hold (Schedule::copies)
};

// Sorted by name: schedule_names() and the unknown-name message list them in this order.
constexpr Family kFamilies[] = {
    {"1f1b", make_1f1b, Chunks::One},
    {"bfs", make_bfs, Chunks::Vpp},
    {"dualpipe", make_dualpipe, Chunks::Two, false, 2},
    {"dualpipev", make_dualpipev, Chunks::Two},
    {"gpipe", make_gpipe, Chunks::One},
    {"interleaved", make_interleaved, Chunks::Vpp},
    {"interleaved-overlap", make_interleaved_overlap, Chunks::Vpp},
    {"v-half", make_v_half, Chunks::Two},
    {"v-min", make_v_min, Chunks::Two},
    {"zb-auto", make_zb_auto, Chunks::One, true},
    {"zb-h1", make_zero_bubble, Chunks::One},
    {"zb-h2", make_zero_bubble, Chunks::One},
    {"zb-v", make_zb_v, Chunks::Two},
};

const Family& find_family(const std::string& name) {
  for (const Family& f : kFamilies)
    if (name == f.name) return f;
  throw_bad_input("--schedule: unknown schedule '{}'; known: {}", name, fmt::join(schedule_names(), ", "));
}

bool is_zero_bubble_h(const std::string& name) { return name == "zb-h1" || name == "zb-h2"; }

// The chunk count the family runs, or BadInput when --vpp asks for something else.
int checked_chunks(const Family& family, int vpp) {
  switch (family.chunks) {
    case Chunks::Vpp: return vpp;
    case Chunks::Two:
      if (vpp != 1 && vpp != 2)
        throw_bad_input("--vpp: {} runs exactly 2 chunks per rank in V order, got {}; omit --vpp or use --vpp 2",
                        family.name, vpp);
      return 2;
    case Chunks::One:
      if (vpp != 1)
        throw_bad_input("--vpp: {} runs one chunk per rank, got {}; use --schedule interleaved for --vpp {}",
                        family.name, vpp, vpp);
      return 1;
  }
  return 1;
}

}  // namespace

std::vector<std::string> schedule_names() {
  std::vector<std::string> names;
  for (const Family& f : kFamilies) names.emplace_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

bool order_from_costs(const std::string& name) { return find_family(name).order_from_costs; }

int model_copies(const std::string& name) { return find_family(name).copies; }

std::vector<std::string> one_copy_schedule_names() {
  std::vector<std::string> names;
  for (const std::string& name : schedule_names())
    if (model_copies(name) == 1) names.push_back(name);
  return names;
}

void check_one_copy(const std::string& option, const std::string& subject, int copies, const std::string& why,
                    const std::string& instead) {
  if (copies > 1)
    throw_bad_input("{}: {} runs {} copies of the model, {}; {} dualpipev, its one-copy V form", option, subject, copies,
                    why, instead);
}

int chunks_per_rank(const std::string& name, int vpp) {
  const Family& family = find_family(name);
  // A loop family given --vpp 2 or more is the caller's to report: 1 tells it the family is unchunked.
  if (family.chunks == Chunks::One) return 1;
  return checked_chunks(family, vpp);
}

Schedule empty_schedule(const ScheduleSpec& spec, int chunks) {
  Schedule s;
  s.name = spec.name;
  s.microbatches = spec.microbatches;
  s.placement = Placement::loop(spec.ranks, chunks);
  s.ranks.resize(static_cast<size_t>(spec.ranks));
  return s;
}

Schedule empty_v_schedule(const ScheduleSpec& spec) {
  Schedule s = empty_schedule(spec, 2);
  s.placement = Placement::v(spec.ranks);
  return s;
}

Schedule make_schedule(const ScheduleSpec& spec) {
  const Family& family = find_family(spec.name);
  if (spec.ranks < 1) throw_bad_input("--pp: needs at least 1 pipeline rank, got {}", spec.ranks);
  if (spec.microbatches < 1) throw_bad_input("--microbatches: needs at least 1 micro-batch, got {}", spec.microbatches);
  checked_chunks(family, spec.chunks);
  if (spec.name != "interleaved" && spec.group_size != 0)
    throw_bad_input("--group-size: only interleaved groups micro-batches; omit it for --schedule {}", spec.name);
  if (spec.max_pending != 0 && !is_zero_bubble_h(spec.name))
    throw_bad_input("--max-pending: only zb-h1 and zb-h2 limit pending backward passes; omit it for --schedule {}",
                    spec.name);
  return family.build(spec);
}

}  // namespace pw
