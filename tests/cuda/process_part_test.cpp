// Which ranks, GPUs and transport a process of a CUDA run holds, and how the NCCL id reaches every process:
// made once, at process 0, whatever carries it. Threads stand in for the processes.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "../cli/cli_test_util.hpp"
#include "../error_text.hpp"
#include "../executor/tcp_test_util.hpp"
#include "launched.hpp"
#include "executor/cuda/host/process_part.hpp"
#include "executor/cuda/host/recompute_levels.hpp"

using namespace pw;

using test::in_s;
using test::launched;

namespace {

UniqueIdBytes id_with(unsigned char first) {
  UniqueIdBytes id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<unsigned char>(first + i);
  return id;
}

// Process 0's bytes to every process, as MPI's broadcast does; each caller blocks until process 0 gave them.
class FakeBroadcast {
 public:
  BroadcastBytes at(int process) {
    return [this, process](std::vector<std::byte> bytes) {
      std::unique_lock lock(mutex_);
      if (process == 0) {
        value_ = std::move(bytes);
        given_.notify_all();
      }
      given_.wait(lock, [&] { return value_.has_value(); });
      return *value_;
    };
  }

 private:
  std::mutex mutex_;
  std::condition_variable given_;
  std::optional<std::vector<std::byte>> value_;
};

// Runs distribute_nccl_id as `processes` threads; each process's make_id would give a different id, so the
// ids agreeing means one process made it. Returns every process's id and counts the make_id calls.
std::vector<UniqueIdBytes> distribute(const std::vector<CudaProcessPart>& parts, const std::vector<BroadcastBytes>& casts,
                                      std::vector<int>& made_by) {
  std::vector<UniqueIdBytes> ids(parts.size());
  std::mutex mutex;
  {
    std::vector<std::jthread> threads;
    for (size_t p = 0; p < parts.size(); ++p)
      threads.emplace_back([&, p] {
        ids[p] = distribute_nccl_id(
            parts[p],
            [&, p] {
              std::lock_guard lock(mutex);
              made_by.push_back(static_cast<int>(p));
              return id_with(static_cast<unsigned char>(10 * p + 1));
            },
            casts[p], in_s(10));
      });
  }
  return ids;
}

}  // namespace

TEST_CASE("one process holds every rank: rank r on GPU r mod the GPUs, the transport as place_ranks decides", "[cuda][host]") {
  const CudaProcessPart four_on_two = plan_cuda_process(LaunchEnv{}, 4, 2, "auto", "");
  CHECK(four_on_two.ranks() == std::vector<int>{0, 1, 2, 3});
  CHECK(four_on_two.bootstrap.devices == std::vector<int>{0, 1, 0, 1});
  CHECK(four_on_two.local_transport);  // two ranks share each GPU: NCCL refuses that
  CHECK(four_on_two.processes == 1);
  CHECK(four_on_two.device_of(3) == 1);
  const CudaProcessPart four_on_eight = plan_cuda_process(LaunchEnv{}, 4, 8, "auto", "");
  CHECK(four_on_eight.bootstrap.devices == std::vector<int>{0, 1, 2, 3});
  CHECK_FALSE(four_on_eight.local_transport);
  CHECK(plan_cuda_process(LaunchEnv{}, 4, 8, "local", "").local_transport);
  CHECK(bad_input([] { plan_cuda_process(LaunchEnv{}, 4, 2, "nccl", ""); }) ==
        "--transport: nccl needs a GPU per rank (NCCL refuses two ranks on one GPU); 4 ranks, 2 GPUs; use --transport "
        "local or auto");
  CHECK(bad_input([] { plan_cuda_process(LaunchEnv{}, 4, 2, "auto", "tcp:a:1"); }) ==
        "--rendezvous: it hands the NCCL id between processes a launcher started (mpirun, srun); without a launcher "
        "every rank is a thread of this process, so leave it out");
}

TEST_CASE("launched processes hold their share of the ranks, over NCCL", "[cuda][host]") {
  // mpirun -np 2 on one node of 4 GPUs, 4 ranks: process 1 holds ranks 2 and 3 on GPUs 2 and 3.
  const CudaProcessPart p1 = plan_cuda_process(launched("openmpi", 1, 2, 1, 2), 4, 4, "auto", "");
  CHECK(p1.ranks() == std::vector<int>{2, 3});
  CHECK(p1.bootstrap.devices == std::vector<int>{2, 3});
  CHECK(p1.process == 1);
  CHECK(p1.processes == 2);
  CHECK_FALSE(p1.local_transport);
  CHECK(p1.holds(2));
  CHECK_FALSE(p1.holds(1));
  CHECK(p1.device_of(3) == 3);
  CHECK(bad_input([&] { p1.device_of(0); }) ==
        "runtime error: cuda backend: rank 0 runs in another process; this one holds ranks 2-3 of 4 on GPUs 2,3; NCCL "
        "id over the process group");
  // One process per GPU on two nodes of 2: process 3 is local rank 1 of node 1.
  const CudaProcessPart p3 = plan_cuda_process(launched("openmpi", 3, 4, 1, 2), 4, 2, "nccl", "");
  CHECK(p3.ranks() == std::vector<int>{3});
  CHECK(p3.bootstrap.devices == std::vector<int>{1});
  CHECK(bad_input([] { plan_cuda_process(launched("openmpi", 0, 2, 0, 2), 4, 4, "local", ""); }) ==
        "--transport: local copies between the ranks of one process, and openmpi started 2 processes; use --transport "
        "nccl or auto");
  CHECK(bad_input([] { plan_cuda_process(launched("openmpi", 0, 2, 0, 2), 4, 4, "gloo", ""); }) ==
        "--transport: must be auto, nccl or local, got 'gloo'");
}

TEST_CASE("the NCCL id: made once at process 0 and carried to every process", "[cuda][host]") {
  SECTION("one process makes its own") {
    std::vector<int> made_by;
    const auto ids = distribute({plan_cuda_process(LaunchEnv{}, 4, 4, "auto", "")}, {nullptr}, made_by);
    CHECK(made_by == std::vector<int>{0});
    CHECK(ids[0] == id_with(1));
  }
  SECTION("over MPI's broadcast") {
    FakeBroadcast cast;
    std::vector<CudaProcessPart> parts;
    std::vector<BroadcastBytes> casts;
    for (int p = 0; p < 3; ++p) {
      parts.push_back(plan_cuda_process(launched("openmpi", p, 3, p, 3), 3, 3, "auto", ""));
      casts.push_back(cast.at(p));
    }
    std::vector<int> made_by;
    const auto ids = distribute(parts, casts, made_by);
    CHECK(made_by == std::vector<int>{0});
    for (const UniqueIdBytes& id : ids) CHECK(id == id_with(1));
  }
  SECTION("over a file, the process index as the rendezvous rank") {
    const std::string path = std::string(PIPEWRIGHT_TEST_TMP) + "/process_part_id";
    std::filesystem::remove(path);
    std::vector<CudaProcessPart> parts;
    for (int p = 0; p < 2; ++p)
      parts.push_back(plan_cuda_process(launched("slurm", p, 2, 0, 1), 4, 2, "auto", "file:" + path));
    CHECK(parts[1].ranks() == std::vector<int>{2, 3});
    std::vector<int> made_by;
    const auto ids = distribute(parts, {nullptr, nullptr}, made_by);
    CHECK(made_by == std::vector<int>{0});
    CHECK(ids[1] == id_with(1));
  }
  SECTION("errors") {
    const CudaProcessPart p1 = plan_cuda_process(launched("openmpi", 1, 2, 1, 2), 2, 2, "auto", "");
    CHECK(bad_input([&] { distribute_nccl_id(p1, [] { return id_with(0); }, nullptr, in_s(1)); }) ==
          "runtime error: NCCL bootstrap: the id travels over the process group, and this process has none");
    const BroadcastBytes short_bytes = [](std::vector<std::byte>) { return std::vector<std::byte>(5); };
    CHECK(bad_input([&] { distribute_nccl_id(p1, [] { return id_with(0); }, short_bytes, in_s(1)); }) ==
          "runtime error: NCCL bootstrap: process 1 received 5 bytes from process 0 where an NCCL id has 128");
  }
}

TEST_CASE("recompute levels per layer: the stage's level, else the one level", "[cuda][host]") {
  // 6 layers over stages {0-1}, {2-3}, {4-5}.
  const std::vector<LayerRange> stages = {{0, 1}, {2, 3}, {4, 5}};
  using R = Recompute;
  CHECK(layer_recompute_levels(6, stages, R::Full, {}) == std::vector<R>(6, R::Full));
  CHECK(layer_recompute_levels(6, stages, R::None, {R::Full, R::None, R::Selective}) ==
        std::vector<R>{R::Full, R::Full, R::None, R::None, R::Selective, R::Selective});
  CHECK(bad_input([&] { layer_recompute_levels(6, stages, R::None, {R::Full}); }) ==
        "--stage-recompute: 1 levels for 3 stages; give one level per stage");
}

TEST_CASE("run --rendezvous belongs to the cuda backend", "[cuda][host]") {
  const CliResult r = run_cli({"run", "--model", source_path("examples/tiny-llama.json"), "--cluster", "ideal", "--pp", "2",
                               "--microbatches", "4", "--no-profile", "--rendezvous", "tcp:localhost:29500"});
  CHECK(r.code == 2);
  CHECK(r.err == "error: --rendezvous: it hands the NCCL id between processes of the cuda backend; leave it out with "
                 "--backend cpu\n");
}
