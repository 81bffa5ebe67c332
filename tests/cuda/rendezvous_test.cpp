// Handing the NCCL unique id to every process over TCP on localhost (a TCP group of its own, strangers and
// all) and through a file, with threads as processes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "../error_text.hpp"
#include "../executor/tcp_test_util.hpp"
#include "../cerr_capture.hpp"
#include "executor/cuda/host/rendezvous.hpp"
#include "executor/job_token.hpp"
#include "executor/tcp_hello.hpp"
#include "launched.hpp"

using namespace pw;
using namespace pw::test;

namespace {

UniqueIdBytes some_id() {
  UniqueIdBytes id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<unsigned char>(i * 7 + 3);
  return id;
}

RendezvousSpec tcp_at(int port) { return {RendezvousSpec::Kind::Tcp, "", "127.0.0.1", port}; }

LaunchEnv torchrun(int rank, int world) {
  LaunchEnv e = test::launched("torchrun", rank, world, rank, world, "127.0.0.1", 29500);
  e.job_id_variable = "TORCHELASTIC_RUN_ID";
  e.job_id = "run-1";
  return e;
}

RendezvousParty party(int rank, int world, const RendezvousSpec& spec) { return rendezvous_party(torchrun(rank, world), spec); }

std::string temp_path(const std::string& name) {
  const std::string path = std::string(PIPEWRIGHT_TEST_TMP) + "/" + name;
  std::filesystem::remove(path);
  return path;
}

}  // namespace

TEST_CASE("rendezvous specs: file:PATH and tcp:HOST:PORT", "[cuda][host]") {
  const RendezvousSpec f = rendezvous_from_text("file:/shared/job42.id");
  CHECK(f.kind == RendezvousSpec::Kind::File);
  CHECK(f.path == "/shared/job42.id");
  const RendezvousSpec t = rendezvous_from_text("tcp:node-001:29500");
  CHECK(t.kind == RendezvousSpec::Kind::Tcp);
  CHECK(t.host == "node-001");
  CHECK(t.port == 29500);
  CHECK(to_text(t) == "tcp:node-001:29500");
  CHECK(to_text(f) == "file:/shared/job42.id");
  for (const char* bad : {"tcp:node:0", "tcp:node", "tcp::29500", "udp:x:1", "file:", "tcp:node:70000", "tcp:node:29a"})
    CHECK(bad_input([&] { rendezvous_from_text(bad); }) ==
          fmt::format("--rendezvous: '{}' is neither file:PATH (a path every node shares) nor tcp:HOST:PORT", bad));
}

TEST_CASE("TCP: process 0 hands the id to three processes on localhost, with the job's token", "[cuda][host]") {
  const int port = free_port();
  const RendezvousSpec spec = tcp_at(port);
  std::vector<UniqueIdBytes> got(4);
  std::vector<std::string> errors(4);
  std::vector<std::thread> processes;
  for (int p = 0; p < 4; ++p)
    processes.emplace_back([&, p] {
      errors[static_cast<size_t>(p)] = bad_input([&] {
        got[static_cast<size_t>(p)] = exchange_id(spec, party(p, 4, spec), [] { return some_id(); }, in_s(10));
      });
    });
  for (auto& t : processes) t.join();
  for (int p = 0; p < 4; ++p) {
    CHECK(errors[static_cast<size_t>(p)] == "no error");
    CHECK(got[static_cast<size_t>(p)] == some_id());
  }
  // The token is this job's at this address: the launcher's run id, bound to host and port.
  const RendezvousParty p1 = party(1, 4, spec);
  CHECK(p1.token == job_token(torchrun(1, 4), "127.0.0.1", port).digest);
  CHECK(p1.token_source == "TORCHELASTIC_RUN_ID");
  CHECK(p1.world_variable == "WORLD_SIZE");
  CHECK(p1.rank_variable == "RANK");
  // Without a job id the address alone is public: refused, naming the token to export.
  LaunchEnv bare = torchrun(1, 4);
  bare.job_id_variable.clear();
  bare.job_id.clear();
  CHECK(bad_input([&] { rendezvous_party(bare, spec); }) ==
        "PIPEWRIGHT_JOB_TOKEN: not set, and the launcher gives no job id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID): with "
        "--rendezvous HOST and --rendezvous PORT alone anyone who can reach 127.0.0.1:" + std::to_string(port) +
        " could join as a rank; export one token to every process of the job, e.g. export "
        "PIPEWRIGHT_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')");
}

TEST_CASE("TCP: processes that start before process 0 listens keep trying", "[cuda][host]") {
  const RendezvousSpec spec = tcp_at(free_port());
  UniqueIdBytes got{};
  std::thread other([&] { got = exchange_id(spec, party(1, 2, spec), [] { return UniqueIdBytes{}; }, in_s(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const UniqueIdBytes id = exchange_id(spec, party(0, 2, spec), [] { return some_id(); }, in_s(10));
  other.join();
  CHECK(id == some_id());
  CHECK(got == some_id());
}

TEST_CASE("TCP: a missing process or an absent process 0 ends at the deadline, not in a hang", "[cuda][host]") {
  const RendezvousSpec spec = tcp_at(free_port());
  const std::string missing = bad_input([&] { exchange_id(spec, party(0, 3, spec), some_id, in_s(0.3)); });
  CHECK(missing == fmt::format("runtime error: rendezvous: process 0 of 3: processes 1, 2 did not join at port {} within "
                               "0.3 s; did they start, with --rendezvous HOST naming this host?",
                               spec.port));
  const std::string absent = bad_input([&] { exchange_id(spec, party(2, 3, spec), some_id, in_s(0.3)); });
  CHECK(absent == fmt::format("runtime error: rendezvous: process 2 of 3 could not join process 0 at 127.0.0.1:{} within "
                              "0.3 s (Connection refused); is process 0 running, and are --rendezvous HOST and "
                              "--rendezvous PORT the same for every process?",
                              spec.port));
}

TEST_CASE("TCP: a process of another world size is bad input at both ends, naming the launcher's variable",
          "[cuda][host]") {
  const RendezvousSpec spec = tcp_at(free_port());
  std::string other;
  std::thread process1([&] {
    RendezvousParty eight = party(1, 8, spec);
    eight.token = party(1, 4, spec).token;  // the same job, started with another world size
    other = bad_input([&] { exchange_id(spec, eight, some_id, in_s(5)); });
  });
  const std::string err = bad_input([&] { exchange_id(spec, party(0, 4, spec), some_id, in_s(5)); });
  process1.join();
  const std::string text = "WORLD_SIZE: process 1 was started for 8 processes and process 0 for 4; start every process "
                           "with the same WORLD_SIZE";
  CHECK(err == text);
  CHECK(other == text);
}

TEST_CASE("TCP: strangers on the rendezvous port are dropped and named, the id still arrives", "[cuda][host]") {
  const RendezvousSpec spec = tcp_at(free_port());
  CerrCapture log;
  UniqueIdBytes at0{}, at1{};
  std::string errors[2];
  std::thread process0([&] {
    errors[0] = bad_input([&] { at0 = exchange_id(spec, party(0, 2, spec), some_id, in_s(10)); });
  });
  // One silent, one with another job's token claiming rank 1 of a world of 99, one sending garbage.
  const Socket silent = connect_when_listening(spec.port);
  const Socket impostor = connect_when_listening(spec.port);
  Sha256 other_job{};
  other_job[0] = 7;
  const auto fake = hello_to_wire(Hello{other_job, 1, 99, Card{1, "impostor"}});
  send_all(impostor, fake.data(), fake.size());
  const Socket junk = connect_when_listening(spec.port);
  const std::vector<unsigned char> garbage(kHelloBytes, 0xff);
  send_all(junk, garbage.data(), garbage.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread process1([&] {
    errors[1] = bad_input([&] { at1 = exchange_id(spec, party(1, 2, spec), some_id, in_s(10)); });
  });
  process1.join();
  process0.join();
  CHECK(errors[0] == "no error");
  CHECK(errors[1] == "no error");
  CHECK(at0 == some_id());
  CHECK(at1 == some_id());
  const std::string warnings = log.text();
  const std::string at = " to port " + std::to_string(spec.port) + ": ";
  CHECK_THAT(warnings, Catch::Contains("warning: process 0 dropped a connection from " + local_text(impostor) + at +
                                       "another job token, claiming rank 1 of 99 (this job's comes from TORCHELASTIC_RUN_ID)\n"));
  CHECK_THAT(warnings, Catch::Contains("warning: process 0 dropped a connection from " + local_text(junk) + at +
                                       "not a pipewright hello\n"));
  CHECK_THAT(warnings, Catch::Contains("warning: process 0 dropped a connection from " + local_text(silent) + at));
}

TEST_CASE("TCP: a process of another job token is told so and fails at once", "[cuda][host]") {
  const RendezvousSpec spec = tcp_at(free_port());
  LaunchEnv other_run = torchrun(1, 2);
  other_run.job_id = "another-run";
  std::string at1;
  double seconds = 99;
  std::thread process1([&] {
    const auto start = RendezvousClock::now();
    at1 = bad_input([&] { exchange_id(spec, rendezvous_party(other_run, spec), some_id, in_s(5)); });
    seconds = std::chrono::duration<double>(RendezvousClock::now() - start).count();
  });
  CerrCapture log;
  const std::string at0 = bad_input([&] { exchange_id(spec, party(0, 2, spec), some_id, in_s(1)); });
  process1.join();
  CHECK(at1 == "job token: this process's differs from process 0's, which comes from TORCHELASTIC_RUN_ID; start every "
               "process of the job with the same TORCHELASTIC_RUN_ID");
  CHECK(seconds < 2);
  CHECK_THAT(at0, Catch::StartsWith("runtime error: rendezvous: process 0 of 2: process 1 did not join"));
}

TEST_CASE("file: rank 0 publishes, the others wait for the file", "[cuda][host]") {
  const std::string path = temp_path("rendezvous_test.id");
  std::vector<UniqueIdBytes> got(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      const RendezvousSpec spec{RendezvousSpec::Kind::File, path, "", 0};
      got[static_cast<size_t>(r)] = exchange_id(spec, party(r, 3, spec), [] { return some_id(); }, in_s(10));
    });
  for (auto& t : ranks) t.join();
  for (const UniqueIdBytes& id : got) CHECK(id == some_id());
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

  // A file written for another world size is refused; no file at all ends at the deadline.
  CHECK(bad_input([&] { await_id_file(path, 4, in_s(1)); }) ==
        fmt::format("runtime error: rendezvous: '{}' starts with 'pipewright-nccl-id 1 3', not 'pipewright-nccl-id 1 4': "
                    "a file of another job? give each job its own path",
                    path));
  const std::string none = temp_path("rendezvous_none.id");
  CHECK(bad_input([&] { await_id_file(none, 2, in_s(0.1)); }) ==
        fmt::format("runtime error: rendezvous: no NCCL unique id appeared in '{}' before the deadline; did rank 0 start, "
                    "and do all nodes share that path?",
                    none));
}
