#include "cli/argument_check.hpp"

#include <algorithm>
#include <tuple>

#include "core/error.hpp"

namespace pw {

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbours each cost 1 (`--modle` is one swap from `--model`).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string_view without_dashes(std::string_view name) {
  while (!name.empty() && name.front() == '-') name.remove_prefix(1);
  return name;
}

std::vector<std::string> long_option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& name : opt->get_lnames()) names.push_back("--" + name);
  return names;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!sub->get_name().empty()) names.push_back(sub->get_name());
  return names;
}

const CLI::App* subcommand_named(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!sub->get_name().empty() && sub->get_name() == name) return sub;
  return nullptr;
}

// "plan", "serve simulate": the words that select `app` under the root.
std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; a != nullptr && a->get_parent() != nullptr; a = a->get_parent())
    path = path.empty() ? a->get_name() : a->get_name() + " " + path;
  return path;
}

// The commands, anywhere under `app`, that have an option of this name.
void commands_with_option(const CLI::App& app, const std::string& name, std::vector<std::string>& found) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name().empty()) continue;
    if (sub->get_option_no_throw(name) != nullptr) found.push_back(command_path(*sub));
    commands_with_option(*sub, name, found);
  }
}

bool takes_values(const CLI::Option& opt) { return opt.get_items_expected_max() > 0; }

bool is_option_word(const std::string& word) {
  if (word.size() < 2 || word[0] != '-') return false;
  if (word[1] == '-') return word.size() > 2;
  // -1, -0.5: negative numbers are values.
  return std::isalpha(static_cast<unsigned char>(word[1])) != 0;
}

[[noreturn]] void throw_unknown_option(const CLI::App& root, const CLI::App& app, const std::string& name) {
  const std::string where = command_path(app).empty() ? "pipewright" : command_path(app);
  const std::string near = nearest_name(name, long_option_names(app));
  std::vector<std::string> elsewhere;
  commands_with_option(root, name, elsewhere);
  const std::string owners = elsewhere.empty() ? "" : fmt::format("{} is an option of {}", name, fmt::join(elsewhere, ", "));
  if (!near.empty())
    throw_bad_input("{}: unknown option {}; did you mean {}?{}", where, name, near, owners.empty() ? "" : " (" + owners + ")");
  if (!owners.empty()) throw_bad_input("{}: unknown option {}; {}", where, name, owners);
  throw_bad_input("{}: unknown option {}; pipewright {} --help lists the options", where, name, where);
}

[[noreturn]] void throw_unknown_command(const CLI::App& app, const std::string& word) {
  const std::vector<std::string> names = subcommand_names(app);
  const std::string where = command_path(app).empty() ? "pipewright" : "pipewright " + command_path(app);
  const std::string near = nearest_name(word, names);
  if (!near.empty()) throw_bad_input("{}: unknown command '{}'; did you mean '{}'?", where, word, near);
  throw_bad_input("{}: unknown command '{}'; the commands are {}", where, word, fmt::format("{}", fmt::join(names, ", ")));
}

}  // namespace

const std::vector<OptionAlias>& megatron_aliases() {
  // Megatron-LM's arguments (megatron/training/arguments.py) whose meaning is the pipewright option's.
  static const std::vector<OptionAlias> aliases = {
      {"--seq-length", "--seq-len"},
      {"--tensor-model-parallel-size", "--tp"},
      {"--pipeline-model-parallel-size", "--pp"},
      {"--context-parallel-size", "--cp"},
      {"--expert-model-parallel-size", "--ep"},
      {"--expert-tensor-parallel-size", "--etp"},
      {"--num-virtual-stages-per-pipeline-rank", "--vpp"},
      {"--recompute-granularity", "--recompute"},
      {"--use-distributed-optimizer", "--distributed-optimizer"},
      {"--use-precision-aware-optimizer", "--precision-aware-optimizer"},
      {"--moe-token-dispatcher-type", "--dispatcher"},
      {"--moe-expert-capacity-factor", "--capacity-factor"},
  };
  return aliases;
}

std::string nearest_name(std::string_view given, const std::vector<std::string>& names) {
  const std::string_view word = without_dashes(given);
  if (word.empty()) return "";
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::tuple<std::size_t, std::size_t, std::string> best{SIZE_MAX, 0, ""};
  for (const std::string& name : names) {
    const std::string_view candidate = without_dashes(name);
    const bool prefix = word.size() >= 3 && (candidate.substr(0, word.size()) == word || word.substr(0, candidate.size()) == candidate);
    const std::size_t distance = prefix ? 1 : edit_distance(word, candidate);
    if (distance > limit) continue;
    best = std::min(best, std::tuple{distance, candidate.size(), name});
  }
  return std::get<2>(best);
}

std::vector<std::string> checked_arguments(const CLI::App& root, const std::vector<std::string>& args) {
  std::vector<std::string> checked;
  checked.reserve(args.size());
  const CLI::App* app = &root;
  bool value_may_follow = false;  // the previous word was an option that takes values
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string word = args[i];
    if (word == "--") {  // the rest are values
      checked.insert(checked.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    // After an option that takes a value, "-inf" or "-x" is that value.
    const bool value = !is_option_word(word) || (value_may_follow && word.rfind("--", 0) != 0);
    if (value) {
      if (const CLI::App* sub = subcommand_named(*app, word); sub != nullptr && !value_may_follow) {
        app = sub;
      } else if (app->get_require_subcommand_min() > 0 && !value_may_follow) {
        throw_unknown_command(*app, word);
      }
      value_may_follow = false;
      checked.push_back(std::move(word));
      continue;
    }
    const std::size_t equals = word.find('=');
    std::string name = word.substr(0, equals);
    if (app->get_option_no_throw(name) == nullptr) {
      for (const OptionAlias& alias : megatron_aliases())
        if (name == alias.megatron && app->get_option_no_throw(std::string(alias.pipewright)) != nullptr) {
          name = alias.pipewright;
          word = equals == std::string::npos ? name : name + word.substr(equals);
        }
    }
    const CLI::Option* opt = app->get_option_no_throw(name);
    if (opt == nullptr) throw_unknown_option(root, *app, name);
    value_may_follow = equals == std::string::npos && takes_values(*opt);
    checked.push_back(std::move(word));
  }
  return checked;
}

}  // namespace pw
