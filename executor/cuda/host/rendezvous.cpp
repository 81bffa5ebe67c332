#include "executor/cuda/host/rendezvous.hpp"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {
namespace {

constexpr const char* kFileHeader = "pipewright-nccl-id 1";

std::string errno_text() { return std::strerror(errno); }

}  // namespace

RendezvousSpec rendezvous_from_text(const std::string& text) {
  RendezvousSpec s;
  const auto fail = [&] {
    throw_bad_input("--rendezvous: '{}' is neither file:PATH (a path every node shares) nor tcp:HOST:PORT", text);
  };
  if (text.rfind("file:", 0) == 0) {
    s.kind = RendezvousSpec::Kind::File;
    s.path = text.substr(5);
    if (s.path.empty()) fail();
    return s;
  }
  if (text.rfind("tcp:", 0) != 0) fail();
  const std::string rest = text.substr(4);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) fail();
  s.kind = RendezvousSpec::Kind::Tcp;
  s.host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) fail();
  s.port = std::stoi(port);
  if (s.port < 1 || s.port > 65535) fail();
  return s;
}

std::string to_text(const RendezvousSpec& spec) {
  return spec.kind == RendezvousSpec::Kind::File ? "file:" + spec.path : fmt::format("tcp:{}:{}", spec.host, spec.port);
}

void publish_id_file(const std::string& path, int world_size, const UniqueIdBytes& id) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kFileHeader << ' ' << world_size << '\n';
    out.write(reinterpret_cast<const char*>(id.data()), static_cast<std::streamsize>(id.size()));
    if (!out) throw_runtime("rendezvous: cannot write '{}'", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw_runtime("rendezvous: cannot rename '{}' to '{}': {}", tmp, path, errno_text());
}

UniqueIdBytes await_id_file(const std::string& path, int world_size, RendezvousClock::time_point deadline) {
  const std::string header = fmt::format("{} {}", kFileHeader, world_size);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::string line;
      std::getline(in, line);
      if (line != header)
        throw_runtime("rendezvous: '{}' starts with '{}', not '{}': a file of another job? give each job its own path",
                      path, line, header);
      UniqueIdBytes id{};
      in.read(reinterpret_cast<char*>(id.data()), static_cast<std::streamsize>(id.size()));
      if (in.gcount() != static_cast<std::streamsize>(id.size()))
        throw_runtime("rendezvous: '{}' holds {} of the {} bytes of an NCCL unique id", path, in.gcount(), id.size());
      return id;
    }
    if (RendezvousClock::now() >= deadline)
      throw_runtime("rendezvous: no NCCL unique id appeared in '{}' before the deadline; did rank 0 start, and do "
                    "all nodes share that path?",
                    path);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

RendezvousParty rendezvous_party(const LaunchEnv& env, const RendezvousSpec& spec) {
  if (spec.kind == RendezvousSpec::Kind::Tcp) return tcp_meeting_config(env, spec.host, spec.port, AddressNames{"--rendezvous HOST", "--rendezvous PORT"});
  RendezvousParty party;
  party.rank = env.rank;
  party.world_size = env.world_size;
  return party;
}

UniqueIdBytes broadcast_id(int process, const std::function<UniqueIdBytes()>& make_id, const BroadcastBytes& broadcast,
                           const std::string& context) {
  std::vector<std::byte> bytes;
  if (process == 0) {
    const UniqueIdBytes id = make_id();
    bytes.resize(id.size());
    std::memcpy(bytes.data(), id.data(), id.size());
  }
  bytes = broadcast(std::move(bytes));
  UniqueIdBytes id{};
  if (bytes.size() != id.size())
    throw_runtime("{}: process {} received {} bytes from process 0 where an NCCL id has {}", context, process,
                  bytes.size(), id.size());
  std::memcpy(id.data(), bytes.data(), id.size());
  return id;
}

UniqueIdBytes exchange_id_over_tcp(const RendezvousParty& party, const std::function<UniqueIdBytes()>& make_id,
                                   RendezvousClock::time_point deadline) {
  RendezvousParty config = party;
  // Tenths of a second: the group's messages print its timeout, and "within 299.998 s" helps nobody.
  const double left = std::chrono::duration<double>(deadline - RendezvousClock::now()).count();
  config.timeout_s = std::max(0.1, std::round(left * 10) / 10);
  try {
    TcpProcessGroup group(config);
    const UniqueIdBytes id = broadcast_id(
        group.rank(), make_id, [&](std::vector<std::byte> bytes) { return group.broadcast(std::move(bytes), deadline); },
        "rendezvous");
    group.barrier(deadline);
    return id;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::BadInput) throw;
    if (std::string_view(e.what()).starts_with("rendezvous: ")) throw;
    throw_runtime("rendezvous: {}", e.what());
  }
}

}  // namespace pw
