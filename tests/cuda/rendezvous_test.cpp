// Handing the NCCL unique id to every rank over TCP on localhost and through a file, with threads as ranks.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "../error_text.hpp"
#include "executor/cuda/host/rendezvous.hpp"

using namespace pw;

namespace {

UniqueIdBytes some_id() {
  UniqueIdBytes id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<unsigned char>(i * 7 + 3);
  return id;
}

RendezvousClock::time_point in_seconds(double s) {
  return RendezvousClock::now() + std::chrono::duration_cast<RendezvousClock::duration>(std::chrono::duration<double>(s));
}

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

TEST_CASE("TCP: rank 0 serves the id to three ranks on localhost", "[cuda][host]") {
  IdServer server(0);
  REQUIRE(server.port() > 0);
  const UniqueIdBytes id = some_id();
  std::vector<UniqueIdBytes> got(4);
  std::vector<std::thread> clients;
  for (int r = 1; r < 4; ++r)
    clients.emplace_back([&, r] { got[static_cast<size_t>(r)] = fetch_id("127.0.0.1", server.port(), r, 4, in_seconds(10)); });
  server.serve(id, 4, in_seconds(10));
  for (auto& t : clients) t.join();
  for (int r = 1; r < 4; ++r) CHECK(got[static_cast<size_t>(r)] == id);
}

TEST_CASE("TCP: clients that start before rank 0 listens keep trying", "[cuda][host]") {
  int port = 0;
  {
    IdServer probe(0);  // a port that was free a moment ago
    port = probe.port();
  }
  UniqueIdBytes got{};
  std::thread client([&] { got = fetch_id("localhost", port, 1, 2, in_seconds(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const UniqueIdBytes id = exchange_id(RendezvousSpec{RendezvousSpec::Kind::Tcp, "", "localhost", port}, 0, 2,
                                       [] { return some_id(); }, in_seconds(10));
  client.join();
  CHECK(id == some_id());
  CHECK(got == some_id());
}

TEST_CASE("TCP: a missing rank or an absent rank 0 ends at the deadline, not in a hang", "[cuda][host]") {
  IdServer server(0);
  const std::string missing = bad_input([&] { server.serve(some_id(), 3, in_seconds(0.2)); });
  CHECK(missing == fmt::format("runtime error: rendezvous: ranks 1, 2 of 3 did not fetch the NCCL unique id from port "
                               "{} before the deadline",
                               server.port()));
  int port = 0;
  {
    IdServer probe(0);
    port = probe.port();
  }
  const std::string absent = bad_input([&] { fetch_id("127.0.0.1", port, 2, 3, in_seconds(0.2)); });
  CHECK(absent == fmt::format("runtime error: rendezvous: rank 2 got no NCCL unique id from rank 0 at 127.0.0.1:{} "
                              "before the deadline (Connection refused)",
                              port));
}

TEST_CASE("TCP: a rank of another world size is named", "[cuda][host]") {
  IdServer server(0);
  std::thread client([&] { bad_input([&] { fetch_id("127.0.0.1", server.port(), 1, 8, in_seconds(1)); }); });
  const std::string err = bad_input([&] { server.serve(some_id(), 4, in_seconds(5)); });
  client.join();
  CHECK(err == "runtime error: rendezvous: rank 1 belongs to a job of 8 ranks, this one has 4; check WORLD_SIZE on every "
               "node");
}

TEST_CASE("file: rank 0 publishes, the others wait for the file", "[cuda][host]") {
  const std::string path = temp_path("rendezvous_test.id");
  std::vector<UniqueIdBytes> got(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      got[static_cast<size_t>(r)] = exchange_id(RendezvousSpec{RendezvousSpec::Kind::File, path, "", 0}, r, 3,
                                                [] { return some_id(); }, in_seconds(10));
    });
  for (auto& t : ranks) t.join();
  for (const UniqueIdBytes& id : got) CHECK(id == some_id());
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

  // A file written for another world size is refused; no file at all ends at the deadline.
  CHECK(bad_input([&] { await_id_file(path, 4, in_seconds(1)); }) ==
        fmt::format("runtime error: rendezvous: '{}' starts with 'pipewright-nccl-id 1 3', not 'pipewright-nccl-id 1 4': "
                    "a file of another job? give each job its own path",
                    path));
  const std::string none = temp_path("rendezvous_none.id");
  CHECK(bad_input([&] { await_id_file(none, 2, in_seconds(0.1)); }) ==
        fmt::format("runtime error: rendezvous: no NCCL unique id appeared in '{}' before the deadline; did rank 0 start, "
                    "and do all nodes share that path?",
                    none));
}
