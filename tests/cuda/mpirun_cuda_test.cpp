// `mpirun -np 2 pipewright run --backend cuda`: without a GPU, the job ends at once with the no-GPU line,
// said once, exit 1; with 2 GPUs or more, two processes train a 4-stage plan (pp 2, vpp 2: a rank and a GPU
// each) to the single process's losses. Skipped (with a message) without MPI, mpirun or the binary.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "executor/cuda/host/cuda_api.hpp"
#include "executor/process_group.hpp"

using namespace pw;

namespace {

// The test program lies in BUILD/tests, the pipewright binary in BUILD/cli.
std::string binary() { return std::string(PIPEWRIGHT_TEST_TMP) + "/../cli/pipewright"; }

std::string mpirun_path() {
  for (const char* p : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

std::string why_skipped() {
  if (!cuda_built()) return "built without CUDA";
  if (!built_with_mpi()) return "built without MPI (PIPEWRIGHT_MPI)";
  if (mpirun_path().empty()) return "no mpirun found";
  if (access(binary().c_str(), X_OK) != 0) return "no pipewright binary at " + binary();
  return "";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Job {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

// With a hard stop at 120 s, so that a hang fails the test instead of stalling the suite.
Job run_job(const std::string& args, const std::string& name) {
  const std::string base = std::string(PIPEWRIGHT_TEST_TMP) + "/mpi-cuda-" + name;
  const std::string cmd = "timeout -k 5 120 " + args + " >" + base + ".out 2>" + base + ".err";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  Job j;
  j.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  j.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  j.out = slurp(base + ".out");
  j.err = slurp(base + ".err");
  return j;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::string mpirun(int np) {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + mpirun_path() + " --oversubscribe -np " +
         std::to_string(np) + " ";
}

// The tiny Llama over 4 stages on 2 ranks (interleaved, 2 chunks each), fp32 and SGD: losses comparable.
std::string tiny_run() {
  return binary() + " run --backend cuda --dtype fp32 --optimizer sgd --lr 0.1 --model " + std::string(PIPEWRIGHT_SOURCE_DIR) +
         "/examples/tiny-llama.json --cluster ideal --pp 2 --vpp 2 --schedule interleaved --microbatches 4 "
         "--iterations 2 --warmup 0 --no-profile --timeout 60 --json";
}

}  // namespace

TEST_CASE("mpirun -np 2 with the cuda backend: the no-GPU line once, or the single process's losses", "[cuda][mpi]") {
  if (const std::string why = why_skipped(); !why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  const GpuProbe probe = probe_gpus();
  if (!gpu_present(probe)) {
    const Job j = run_job(mpirun(2) + tiny_run(), "no-gpu");
    INFO(j.err);
    CHECK(j.code == 1);
    CHECK(count(j.err, "error: " + no_gpu_text(probe) + "\n") == 1);
    CHECK(count(j.err, "error: ") == 1);
    CHECK(j.out.empty());
    CHECK(j.seconds < 10);  // process 0 said it and ended the job; nobody waited for a timeout
    return;
  }
  if (probe.count < 2) {
    WARN("2 processes skipped: NCCL needs a GPU per rank, " << probe.count << " GPU here");
    return;
  }
  const Job one = run_job(tiny_run(), "one-process");
  INFO(one.err);
  REQUIRE(one.code == 0);
  const Job two = run_job(mpirun(2) + tiny_run(), "two-processes");
  INFO(two.err);
  REQUIRE(two.code == 0);
  const nlohmann::json a = nlohmann::json::parse(one.out);
  const nlohmann::json b = nlohmann::json::parse(two.out);  // one document: process 1 printed nothing
  REQUIRE(a["losses"].size() == 2);
  REQUIRE(b["losses"].size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK(b["losses"][i].get<double>() == Approx(a["losses"][i].get<double>()).epsilon(1e-4));
  REQUIRE(b["ranks"].size() == 2);
  for (const auto& r : b["ranks"]) CHECK(r["busy_s"].get<double>() > 0);  // rank 1's records reached process 0
}
