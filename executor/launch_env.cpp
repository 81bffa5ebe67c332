#include "executor/launch_env.hpp"

#include <charconv>
#include <cstdint>
#include <cstdlib>

#include "core/error.hpp"

extern char** environ;

namespace pw {
namespace {

class Reader {
 public:
  Reader(const std::map<std::string, std::string>& env, std::string launcher_hint)
      : env_(env), hint_(std::move(launcher_hint)) {}

  bool has(const std::string& name) const { return env_.count(name) > 0; }

  // A whole number from `minimum` to `maximum`; the fix names the launcher that should have set it. Counts
  // and indices of processes and nodes stay within kMostProcesses, so nothing sized by them can be huge.
  int number(const std::string& name, int minimum = 0, int maximum = kMostProcesses) const {
    const std::string& text = env_.at(name);
    long long value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || value > 1'000'000'000LL || value < -1'000'000'000LL)
      throw_bad_input("{}: '{}' is not a whole number; {}", name, text, hint_);
    if (value < minimum)
      throw_bad_input("{}: must be {} or more, got {}; {}", name, minimum, value, hint_);
    if (value > maximum) throw_bad_input("{}: {} is beyond {}, the most processes pipewright joins; {}", name, value, maximum, hint_);
    return static_cast<int>(value);
  }

  int required(const std::string& name, const std::string& because, int minimum = 0) const {
    if (!has(name)) throw_bad_input("{}: not set while {} is; {}", name, because, hint_);
    return number(name, minimum);
  }

  int optional(const std::string& name, int fallback, int minimum = 0) const {
    return has(name) ? number(name, minimum) : fallback;
  }

  const std::string& text(const std::string& name) const { return env_.at(name); }
  const std::string& hint() const { return hint_; }

 private:
  const std::map<std::string, std::string>& env_;
  std::string hint_;
};

void check_below(const Reader& r, const std::string& rank_name, int rank, const std::string& size_name, int size) {
  if (rank >= size)
    throw_bad_input("{}: {} is not below {} {}; {}", rank_name, rank, size_name, size, r.hint());
}

// Slurm's tasks-per-node list ("2(x3),1": 2 tasks on each of the first 3 nodes, 1 on the fourth), read
// without expanding it: a repeat count of half a billion costs nothing, and the node count is bounded.
struct TasksPerNode {
  int nodes = 0;
  int on_node = 0;  // the entry of the node asked for; 0 when the list has fewer nodes
};

TasksPerNode tasks_per_node(const std::string& name, const std::string& text, int node, const Reader& r) {
  TasksPerNode out;
  std::int64_t nodes = 0;
  size_t pos = 0;
  const auto bad = [&] {
    throw_bad_input("{}: '{}' is not Slurm's tasks-per-node list such as 2(x3),1; {}", name, text, r.hint());
  };
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    int count = 0, repeat = 1;
    const size_t paren = item.find("(x");
    const std::string head = item.substr(0, paren);
    auto parse = [&](const std::string& s, int& v) {
      const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < 1) bad();
    };
    parse(head, count);
    if (paren != std::string::npos) {
      if (item.back() != ')') bad();
      parse(item.substr(paren + 2, item.size() - paren - 3), repeat);
    }
    if (node >= nodes && node < nodes + repeat) out.on_node = count;
    nodes += repeat;
    if (count > kMostProcesses || nodes > kMostProcesses)
      throw_bad_input("{}: '{}' lists more than {} {}, the most pipewright joins; {}", name, text, kMostProcesses,
                      count > kMostProcesses ? "tasks on a node" : "nodes", r.hint());
    pos = end + 1;
  }
  if (nodes == 0) bad();
  out.nodes = static_cast<int>(nodes);
  return out;
}

// The variable names of a launcher that sets world size, rank, local size and local rank directly.
struct RankVariables {
  const char* launcher;
  const char* world_size;
  const char* rank;
  const char* local_world_size;
  const char* local_rank;
};
constexpr RankVariables kOpenMpi{"openmpi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                 "OMPI_COMM_WORLD_LOCAL_RANK"};
constexpr RankVariables kTorchrun{"torchrun", "WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK"};

LaunchEnv from_rank_variables(const Reader& r, const RankVariables& v) {
  LaunchEnv e;
  e.launcher = v.launcher;
  e.world_size = r.number(v.world_size, 1);
  e.rank = r.required(v.rank, v.world_size);
  check_below(r, v.rank, e.rank, v.world_size, e.world_size);
  e.local_world_size = r.optional(v.local_world_size, e.world_size, 1);
  e.local_rank = r.optional(v.local_rank, e.rank < e.local_world_size ? e.rank : 0);
  check_below(r, v.local_rank, e.local_rank, v.local_world_size, e.local_world_size);
  return e;
}

LaunchEnv from_slurm(const Reader& r) {
  LaunchEnv e;
  e.launcher = "slurm";
  const std::string because = "SLURM_PROCID";
  e.rank = r.number("SLURM_PROCID");
  e.world_size = r.required("SLURM_NTASKS", because, 1);
  check_below(r, "SLURM_PROCID", e.rank, "SLURM_NTASKS", e.world_size);
  std::string local_size_name = "SLURM_NTASKS";
  if (r.has("SLURM_NTASKS_PER_NODE")) {
    local_size_name = "SLURM_NTASKS_PER_NODE";
    e.local_world_size = r.number(local_size_name, 1);
  } else {
    const std::string list = r.has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
    if (r.has(list)) {
      const int node = r.optional("SLURM_NODEID", 0);
      const TasksPerNode per_node = tasks_per_node(list, r.text(list), node, r);
      if (node >= per_node.nodes)
        throw_bad_input("SLURM_NODEID: {} is not below the {} nodes of {} '{}'; {}", node, per_node.nodes, list,
                        r.text(list), r.hint());
      e.local_world_size = per_node.on_node;
      local_size_name = fmt::format("this node's {} entry", list);
    } else {
      e.local_world_size = e.world_size;
    }
  }
  e.local_rank = r.optional("SLURM_LOCALID", e.rank < e.local_world_size ? e.rank : 0);
  check_below(r, "SLURM_LOCALID", e.local_rank, local_size_name, e.local_world_size);
  return e;
}

// The user's token first; else what the launcher gives every process of one job and no other job.
void read_job_id(const std::map<std::string, std::string>& env, LaunchEnv& e) {
  const auto value = [&](const char* name) { return env.count(name) ? env.at(name) : std::string(); };
  if (env.count("PIPEWRIGHT_JOB_TOKEN")) {
    const std::string& token = env.at("PIPEWRIGHT_JOB_TOKEN");
    if (token.size() < kShortestJobToken || token.size() > kLongestJobToken)
      throw_bad_input("PIPEWRIGHT_JOB_TOKEN: {} characters; a token has {} to {}, the same for every process of the "
                      "job, e.g. export PIPEWRIGHT_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')",
                      token.size(), kShortestJobToken, kLongestJobToken);
    e.job_id_variable = "PIPEWRIGHT_JOB_TOKEN";
    e.job_id = token;
  } else if (e.launcher == "torchrun" && !value("TORCHELASTIC_RUN_ID").empty()) {
    e.job_id_variable = "TORCHELASTIC_RUN_ID";
    e.job_id = value("TORCHELASTIC_RUN_ID");
  } else if (e.launcher == "slurm" && !value("SLURM_JOB_ID").empty()) {
    e.job_id_variable = "SLURM_JOB_ID";
    e.job_id = value("SLURM_JOB_ID") + "." + (env.count("SLURM_STEP_ID") ? value("SLURM_STEP_ID") : value("SLURM_STEPID"));
  }
}

}  // namespace

LaunchEnv launch_env_from(const std::map<std::string, std::string>& env) {
  LaunchEnv e;
  const bool slurm_step = env.count("SLURM_PROCID") && (env.count("SLURM_STEP_ID") || env.count("SLURM_STEPID"));
  if (env.count("OMPI_COMM_WORLD_SIZE"))
    e = from_rank_variables(Reader(env, "mpirun sets it; start with mpirun -np N, or unset it to run as one process"),
                            kOpenMpi);
  else if (env.count("WORLD_SIZE"))
    e = from_rank_variables(
        Reader(env, "torchrun sets it; start with torchrun --nproc_per_node N, or unset it to run as one process"),
        kTorchrun);
  else if (slurm_step)
    e = from_slurm(Reader(env, "srun sets it; start with srun -n N, or unset it to run as one process"));

  // A single process has no rank 0 to meet: stray values must not stop it.
  if (e.launcher == "none") return e;
  e.gpus_chosen = env.count("CUDA_VISIBLE_DEVICES") && !env.at("CUDA_VISIBLE_DEVICES").empty();
  const Reader any(env, "set it to where rank 0 listens, or unset it");
  if (env.count("MASTER_ADDR")) {
    e.master_addr = env.at("MASTER_ADDR");
    if (e.master_addr.empty()) throw_bad_input("MASTER_ADDR: empty; {}", any.hint());
  }
  read_job_id(env, e);
  if (env.count("MASTER_PORT")) {
    e.master_port = any.number("MASTER_PORT", 1, 1'000'000'000);
    if (e.master_port > 65535) throw_bad_input("MASTER_PORT: {} is not a port (1 to 65535); {}", e.master_port, any.hint());
  }
  return e;
}

LaunchEnv launch_env_from_process() {
  std::map<std::string, std::string> env;
  for (char** p = environ; p && *p; ++p) {
    const std::string entry = *p;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return launch_env_from(env);
}

std::string world_size_flag(const LaunchEnv& env) {
  if (env.launcher == "openmpi") return "mpirun -np";
  if (env.launcher == "slurm") return "srun -n";
  if (env.launcher == "torchrun") return "torchrun --nproc_per_node";
  return "";
}

}  // namespace pw
