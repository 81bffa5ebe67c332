// `mpirun -np N pipewright run ...`: the processes compute what the threads compute, process 0 alone
// reports, and a rank that throws or a process that dies ends the whole job in time, with the rank named and
// no pipewright process left behind. Skipped (with a message) without MPI or mpirun.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "executor/cuda/host/cuda_api.hpp"
#include "executor/process_group.hpp"
#include "tests/executor/command_job.hpp"
#include "../text_match.hpp"

namespace {

using nlohmann::json;

#ifndef PIPEWRIGHT_BINARY
#define PIPEWRIGHT_BINARY ""
#endif
#ifndef PIPEWRIGHT_MPIRUN
#define PIPEWRIGHT_MPIRUN ""
#endif

// Why the process tests cannot run here, or "" when they can.
std::string why_skipped() {
  if (!pw::built_with_mpi()) return "built without MPI (PIPEWRIGHT_MPI)";
  if (std::string(PIPEWRIGHT_MPIRUN).empty() || access(PIPEWRIGHT_MPIRUN, X_OK) != 0) return "no mpirun found";
  if (access(PIPEWRIGHT_BINARY, X_OK) != 0) return "no pipewright binary";
  return "";
}

#define SKIP_WITHOUT_MPI()                                              \
  do {                                                                  \
    if (const std::string why = why_skipped(); !why.empty()) {          \
      WARN("skipped: " << why);                                         \
      return;                                                           \
    }                                                                   \
  } while (false)

using pw::test::Job;
using pw::test::slurp;
using pw::test::tiny_run;

Job run_job(const std::vector<std::string>& args, const std::string& name) {
  return pw::test::run_job(args, std::string(PIPEWRIGHT_TEST_TMP) + "/mpi-" + name);
}

// mpirun as root (CI) needs both variables; --oversubscribe lets 2 or 3 ranks share 2 cores.
std::vector<std::string> mpirun(int np, const std::vector<std::string>& mpirun_extra = {}) {
  std::vector<std::string> a = {"env", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", PIPEWRIGHT_MPIRUN,
                                "--oversubscribe", "-np", std::to_string(np)};
  a.insert(a.end(), mpirun_extra.begin(), mpirun_extra.end());
  return a;
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Live (not zombie) processes whose command line is this binary run with `--seed tag`.
std::set<int> survivors(const std::string& tag) {
  std::set<int> found;
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  while (dirent* d = readdir(proc)) {
    const int pid = std::atoi(d->d_name);
    if (pid <= 0) continue;
    std::string cmdline = slurp("/proc/" + std::string(d->d_name) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(PIPEWRIGHT_BINARY) != 0 || cmdline.find(" --seed " + tag + " ") == std::string::npos) continue;
    const std::string stat = slurp("/proc/" + std::string(d->d_name) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') continue;
    found.insert(pid);
  }
  closedir(proc);
  return found;
}

// Every process of the job is gone (mpirun reaps them; a moment's grace for the last to be reaped).
bool none_survive(const std::string& tag) {
  for (int i = 0; i < 40; ++i) {
    if (survivors(tag).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// A seed no other test uses, so that survivors() finds this job's processes only.
std::string unique_tag(int k) { return std::to_string(900000 + 10 * (getpid() % 10000) + k); }

}  // namespace

TEST_CASE("mpirun -np 2: the processes train to the threads run's losses, and process 0 alone reports") {
  SKIP_WITHOUT_MPI();
  const Job threads = run_job(tiny_run("11", {"--json"}), "threads");
  INFO(threads.err);
  REQUIRE(threads.code == 0);
  const Job processes = run_job(mpirun(2) + tiny_run("11", {"--json"}), "processes");
  INFO(processes.err);
  REQUIRE(processes.code == 0);
  const json t = json::parse(threads.out);
  const json p = json::parse(processes.out);  // one JSON document: the other process printed nothing
  REQUIRE(t["losses"].size() == 2);
  CHECK(p["losses"] == t["losses"]);  // bit for bit: same seed, same floats, same order
  REQUIRE(p["ranks"].size() == 2);
  for (size_t r = 0; r < 2; ++r) {
    // Rank 1's numbers reached process 0; activation bytes follow the schedule, not the timing.
    CHECK(p["ranks"][r]["busy_s"].get<double>() > 0);
    CHECK(p["ranks"][r]["activation_peak_bytes"] == t["ranks"][r]["activation_peak_bytes"]);
  }

  const std::string trace = std::string(PIPEWRIGHT_TEST_TMP) + "/mpi-trace.json";
  std::remove(trace.c_str());
  const Job table = run_job(mpirun(2) + tiny_run("11", {"--trace", trace}), "table");
  INFO(table.err);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("tiny-llama on ideal: pp 2, schedule 1f1b, 4 micro-batches of 1 x 32 tokens\n") == 0);
  CHECK(count(table.out, "backend cpu, real compute, ranks as processes under openmpi, 2 iterations after 0 warm-up\n") == 1);
  CHECK(count(table.out, "measured step time") == 1);
  std::set<int> pids;
  const json written = json::parse(slurp(trace));
  for (const json& e : written["traceEvents"])
    if (e["ph"] == "X") pids.insert(e["pid"].get<int>());
  CHECK(pids == std::set<int>{0, 1});  // both ranks' slices, written by process 0
}

TEST_CASE("mpirun: a rank that throws ends the whole job with exit 1 and its error printed once") {
  SKIP_WITHOUT_MPI();
  const std::string tag = unique_tag(1);
  const Job j = run_job(mpirun(2) + tiny_run(tag, {"--timeout", "60", "--inject-failure", "1:1F2"}), "throws");
  INFO(j.err);
  CHECK(j.code == 1);
  CHECK(count(j.err, "error: rank 1 failed at 1F2: injected failure (--inject-failure)\n") == 1);
  CHECK(count(j.err, "error: ") == 1);
  CHECK(j.out.empty());
  CHECK(j.seconds < 30);  // the others were told at once, not left to their 60 s timeout
  CHECK(none_survive(tag));
  WARN("rank throws under mpirun: ended in " << j.seconds << " s");
}

TEST_CASE("mpirun: a process that dies ends the whole job within the timeout, naming the rank") {
  SKIP_WITHOUT_MPI();
  // Left to itself, mpirun ends the job as soon as a process exits with a non-zero status, and exits with
  // that status (9 here), naming the process itself. The timeouts are long, so that a job ended by them
  // stands apart from one ended by the death however slow the build (TSan-built processes took 10 s).
  std::string tag = unique_tag(2);
  Job j = run_job(mpirun(2) + tiny_run(tag, {"--timeout", "60", "--inject-failure", "1:1F2:exit"}), "dies");
  INFO(j.err);
  CHECK(j.code == 9);
  CHECK(j.seconds < 30);
  CHECK(none_survive(tag));
  WARN("process dies under mpirun: ended in " << j.seconds << " s");

  // Told to let the others run on, mpirun leaves it to them: rank 0 finds rank 1's process gone while it
  // waits for it, reports that once and ends the job with exit 1.
  tag = unique_tag(3);
  j = run_job(mpirun(2, {"--mca", "orte_abort_on_non_zero_status", "0"}) +
                  tiny_run(tag, {"--timeout", "60", "--inject-failure", "1:1F2:exit"}),
              "dies-no-abort");
  INFO(j.err);
  CHECK(j.code == 1);
  const size_t at = j.err.find("error: rank 1 failed: its process (pid ");
  REQUIRE(at != std::string::npos);
  const std::string line = j.err.substr(at, j.err.find('\n', at) - at);
  CHECK(line.find(") ended while rank 0 waited at 0RECV_B") != std::string::npos);
  CHECK(count(j.err, "error: ") == 1);
  CHECK(j.seconds < 30);  // found gone within 0.1 s, not at the 60 s timeout
  CHECK(none_survive(tag));
  WARN("process dies, orte_abort_on_non_zero_status 0: ended in " << j.seconds << " s");
}

TEST_CASE("mpirun: a rank that hangs is found by the others' timeout, and the job ends with exit 1") {
  SKIP_WITHOUT_MPI();
  const std::string tag = unique_tag(5);
  // Rank 0 hangs before its first forward: rank 1 waits for 0SEND_F0 for the 1 s timeout, then ends the job.
  const Job j = run_job(mpirun(2) + tiny_run(tag, {"--timeout", "1", "--inject-failure", "0:0F0:stall"}), "stalls");
  INFO(j.err);
  CHECK(j.code == 1);
  CHECK(count(j.err, "error: rank 1 failed at 1RECV_F0: no message from rank 0 (0SEND_F0) within 1 s\n") == 1);
  CHECK(count(j.err, "error: ") == 1);
  CHECK(j.seconds >= 1);
  CHECK(j.seconds < 30);  // not the 120 s hard stop of a hang; under TSan on a loaded machine it took 6.3 s
  CHECK(none_survive(tag));  // the hung process too
  WARN("rank hangs under mpirun, --timeout 1: ended in " << j.seconds << " s");
}

TEST_CASE("mpirun with another process count than --pp is bad input, said once") {
  SKIP_WITHOUT_MPI();
  const std::string tag = unique_tag(4);
  const Job j = run_job(mpirun(3) + tiny_run(tag), "np3");
  INFO(j.err);
  CHECK(j.code == 2);
  CHECK(count(j.err, "error: --pp: the pipeline has 2 ranks but openmpi started 3 processes; start mpirun -np 2 or run "
                     "--pp 3\n") == 1);
  CHECK(count(j.err, "error: ") == 1);
  CHECK(none_survive(tag));
}

TEST_CASE("mpirun -np 2 with the cuda backend: the no-GPU line once, or the single process's losses", "[cuda][mpi]") {
  SKIP_WITHOUT_MPI();
  if (!pw::cuda_built()) {
    WARN("skipped: built without CUDA");
    return;
  }
  // The tiny Llama over 4 stages on 2 ranks (interleaved, 2 chunks each), fp32 and SGD: losses comparable.
  const std::vector<std::string> cuda = {PIPEWRIGHT_BINARY, "run", "--backend", "cuda", "--dtype", "fp32", "--optimizer",
                                         "sgd", "--lr", "0.1", "--model",
                                         std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-llama.json", "--cluster",
                                         "ideal", "--pp", "2", "--vpp", "2", "--schedule", "interleaved", "--microbatches",
                                         "4", "--iterations", "2", "--warmup", "0", "--no-profile", "--timeout", "60",
                                         "--json"};
  const pw::GpuProbe probe = pw::probe_gpus();
  if (!pw::gpu_present(probe)) {
    const Job j = run_job(mpirun(2) + cuda, "cuda-no-gpu");
    INFO(j.err);
    CHECK(j.code == 1);
    CHECK(count(j.err, "error: " + pw::no_gpu_text(probe) + "\n") == 1);
    CHECK(count(j.err, "error: ") == 1);
    CHECK(j.out.empty());
    CHECK(j.seconds < 10);  // process 0 said it and ended the job; nobody waited for a timeout
    return;
  }
  if (probe.count < 2) {
    WARN("2 processes skipped: NCCL needs a GPU per rank, " << probe.count << " GPU here");
    return;
  }
  const Job one = run_job(cuda, "cuda-one-process");
  INFO(one.err);
  REQUIRE(one.code == 0);
  const Job two = run_job(mpirun(2) + cuda, "cuda-two-processes");
  INFO(two.err);
  REQUIRE(two.code == 0);
  const json a = json::parse(one.out);
  const json b = json::parse(two.out);  // one document: process 1 printed nothing
  REQUIRE(a["losses"].size() == 2);
  REQUIRE(b["losses"].size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK(b["losses"][i].get<double>() == Approx(a["losses"][i].get<double>()).epsilon(1e-4));
  REQUIRE(b["ranks"].size() == 2);
  for (const auto& r : b["ranks"]) CHECK(r["busy_s"].get<double>() > 0);  // rank 1's records reached process 0
}

TEST_CASE("mpirun -np 4: a rank that hangs is named once, not the ranks waiting behind it") {
  SKIP_WITHOUT_MPI();
  const std::string tag = unique_tag(6);
  // Rank 0 hangs before its last forward: rank 1 waits on it, rank 2 on rank 1, rank 3 on rank 2. They
  // told each other what they wait for, so only rank 1 reports, naming rank 0; the others stay quiet.
  std::vector<std::string> args = tiny_run(tag, {"--timeout", "2", "--inject-failure", "0:0F3:stall"});
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--pp") args[i + 1].back() = '4';  // in place: GCC 12 misreads assigning "4" (-Wrestrict)
  const Job j = run_job(mpirun(4) + args, "stalls4");
  INFO(j.err);
  CHECK(j.code == 1);
  CHECK(count(j.err, "error: rank 1 failed at 1RECV_F3: no message from rank 0 (0SEND_F3) within 2 s\n") == 1);
  CHECK(count(j.err, "error: ") == 1);
  CHECK(j.seconds < 30);  // not the 120 s hard stop of a hang; 3 s in Release, 9.2 s under TSan on a loaded CI
  CHECK(none_survive(tag));
  WARN("rank 0 hangs under mpirun -np 4, --timeout 2: ended in " << j.seconds << " s");
}
