#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/excerpt.hpp"
#include "core/json_text.hpp"
#include "schedules/ir.hpp"

namespace pw {

namespace {

constexpr const char* kFormat = "pipewright-schedule";
constexpr int kFileVersion = 1;

// The rank of each stage, each in [0, ranks).
std::vector<int> read_rank_list(const JsonFields& f, const std::string& key, int ranks) {
  const nlohmann::json& v = f.required(key);
  if (!v.is_array()) f.fail(key, fmt::format("must be a list of whole numbers, got {}", json_excerpt(v)));
  f.array(key, kMaxScheduleStages, "stages");
  std::vector<int> out;
  for (const auto& x : v) {
    if (!x.is_number_integer()) f.fail(key, fmt::format("must be a list of whole numbers, got {}", json_excerpt(x)));
    const auto rank = x.get<long long>();
    if (rank < 0 || rank >= ranks)
      f.fail(key, fmt::format("names rank {}, but there are {} ranks (0..{})", rank, ranks, ranks - 1));
    out.push_back(static_cast<int>(rank));
  }
  return out;
}

Placement read_placement(const JsonFields& f) {
  Placement p;
  const std::string kind = f.string("kind");
  p.ranks = f.count("ranks", kMaxScheduleRanks, "ranks");
  p.stage_rank = read_rank_list(f, "stage_rank", p.ranks);
  if (p.stage_rank.empty()) f.fail("stage_rank", "must list the rank of at least one stage");
  const int stages = p.stages();
  if (kind == "loop") {
    p.kind = PlacementKind::Loop;
    if (stages % p.ranks != 0 || Placement::loop(p.ranks, stages / p.ranks).stage_rank != p.stage_rank)
      f.fail("stage_rank", "does not put stage s on rank s mod ranks as kind 'loop' says; use kind 'explicit'");
  } else if (kind == "v") {
    p.kind = PlacementKind::V;
    if (Placement::v(p.ranks).stage_rank != p.stage_rank)
      f.fail("stage_rank", "does not put stages r and 2 ranks - 1 - r on rank r as kind 'v' says; use kind 'explicit'");
  } else if (kind == "explicit") {
    p.kind = PlacementKind::Explicit;
  } else {
    f.fail("kind", fmt::format("must be \"loop\", \"v\" or \"explicit\", got \"{}\"", excerpt(kind)));
  }
  return p;
}

}  // namespace

std::string schedule_to_json_text(const Schedule& s) {
  // Ordered so that a person reading the file sees the format and version first.
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const auto& list : s.ranks) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (const Action& a : list) row.push_back(to_text(a));
    ranks.push_back(std::move(row));
  }
  nlohmann::ordered_json j = {
      {"format", kFormat},
      {"version", kFileVersion},
      {"name", s.name},
      {"microbatches", s.microbatches},
      {"placement",
       {{"kind", to_string(s.placement.kind)}, {"stage_rank", s.placement.stage_rank}, {"ranks", s.placement.ranks}}},
      {"ranks", std::move(ranks)},
      {"lowered", s.lowered},
  };
  if (s.copies != 1) j["copies"] = s.copies;
  return json_file_text(j, "schedule");
}

Schedule schedule_from_json_text(const std::string& text, const std::string& source) {
  const nlohmann::json j = parse_json_text(text, source);
  const JsonFields f(j, source);
  if (const std::string format = f.string("format"); format != kFormat)
    f.fail("format", fmt::format("must be \"{}\", got \"{}\"", kFormat, excerpt(format)));
  if (const long version = f.positive_integer("version"); version != kFileVersion)
    f.fail("version", fmt::format("is {}; this pipewright reads version {}", version, kFileVersion));

  Schedule s;
  s.name = f.string("name");
  s.microbatches = f.count("microbatches", kMaxScheduleMicrobatches, "micro-batches");
  s.placement = read_placement(f.object("placement"));
  s.lowered = f.boolean("lowered", false);
  if (const std::optional<long> copies = f.optional_positive_integer("copies")) {
    // A copy needs at least one stage, and every copy as many.
    if (*copies > s.placement.stages() || s.placement.stages() % *copies != 0)
      f.fail("copies", fmt::format("is {}, which does not divide the placement's {} stages into pipelines of equal "
                                   "length; give a divisor of {} (1: one copy of the model)",
                                   *copies, s.placement.stages(), s.placement.stages()));
    s.copies = static_cast<int>(*copies);
  }

  const nlohmann::json& ranks = f.required("ranks");
  if (!ranks.is_array() || ranks.size() != static_cast<size_t>(s.placement.ranks))
    f.fail("ranks", fmt::format("must be a list of {} per-rank lists of actions (placement.ranks)", s.placement.ranks));
  size_t actions = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const nlohmann::json& row = ranks[r];
    if (!row.is_array()) throw_bad_input("{}: ranks[{}] must be a list of actions such as \"0F0\"", source, r);
    std::vector<Action> list;
    actions += row.size();
    if (actions > static_cast<size_t>(kMaxScheduleActions))
      throw_bad_input("{}: ranks[{}] brings the actions to {}, above the cap of {}; give a schedule with fewer", source,
                      r, actions, kMaxScheduleActions);
    for (size_t k = 0; k < row.size(); ++k) {
      // No action is this long; a long string would only be echoed whole by the action parser.
      if (!row[k].is_string() || row[k].get_ref<const std::string&>().size() > 64)
        throw_bad_input("{}: ranks[{}][{}] must be an action such as \"0F0\", got {}", source, r, k,
                        json_excerpt(row[k]));
      try {
        list.push_back(action_from_text(row[k].get<std::string>()));
      } catch (const Error& e) {
        throw_bad_input("{}: ranks[{}][{}]: {}", source, r, k, e.what());
      }
    }
    s.ranks.push_back(std::move(list));
  }
  return s;
}

}  // namespace pw
