#include "executor/cuda/host/rendezvous.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"
#include "executor/tcp_socket.hpp"

namespace pw {
namespace {

constexpr char kMagic[4] = {'P', 'W', 'I', 'D'};
constexpr const char* kFileHeader = "pipewright-nccl-id 1";

std::string errno_text() { return std::strerror(errno); }

std::string rank_list(const std::set<int>& ranks) {
  std::string out;
  for (int r : ranks) out += fmt::format("{}{}", out.empty() ? "" : ", ", r);
  return out;
}

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

IdServer::IdServer(int port) {
  try {
    Socket listener = listen_on(port);
    port_ = local_port(listener);
    fd_ = listener.release();
  } catch (const Error& e) {
    throw_runtime("rendezvous: {}", e.what());
  }
}

IdServer::IdServer(const std::string& host, int port) {
  try {
    Socket listener = listen_at(host, port);
    port_ = local_port(listener);
    fd_ = listener.release();
  } catch (const Error& e) {
    throw_runtime("rendezvous: {}", e.what());
  }
}

IdServer::~IdServer() { Socket close_it(fd_); }

void IdServer::serve(const UniqueIdBytes& id, int world_size, RendezvousClock::time_point deadline) {
  std::set<int> missing;
  for (int r = 1; r < world_size; ++r) missing.insert(r);
  unsigned char reply[4 + 128];
  std::memcpy(reply, kMagic, 4);
  std::memcpy(reply + 4, id.data(), id.size());
  while (!missing.empty()) {
    if (!wait_for(fd_, POLLIN, deadline))
      throw_runtime("rendezvous: rank{} {} of {} did not fetch the NCCL unique id from port {} before the deadline",
                    missing.size() == 1 ? "" : "s", rank_list(missing), world_size, port_);
    const Socket client(::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid()) continue;  // the client gave up meanwhile
    unsigned char request[12];
    // A client that connects and says nothing must not hold up the others for long.
    const auto answer_by = std::min(deadline, RendezvousClock::now() + std::chrono::seconds(5));
    if (!read_full(client.fd(), request, sizeof request, answer_by) || std::memcmp(request, kMagic, 4) != 0) continue;
    const int rank = static_cast<int>(get_u32(request + 4));
    const int world = static_cast<int>(get_u32(request + 8));
    if (world != world_size)
      throw_runtime("rendezvous: rank {} belongs to a job of {} ranks, this one has {}; check WORLD_SIZE on every node",
                    rank, world, world_size);
    if (rank < 1 || rank >= world_size)
      throw_runtime("rendezvous: a client announced rank {}, outside 1..{}", rank, world_size - 1);
    if (write_full(client.fd(), reply, sizeof reply, answer_by)) missing.erase(rank);
  }
}

UniqueIdBytes fetch_id(const std::string& host, int port, int rank, int world_size, RendezvousClock::time_point deadline) {
  std::string last_error = "no attempt";
  for (;;) {
    const Socket fd = connect_once(host, port, deadline, last_error);
    if (fd.valid()) {
      unsigned char request[12];
      std::memcpy(request, kMagic, 4);
      put_u32(request + 4, static_cast<std::uint32_t>(rank));
      put_u32(request + 8, static_cast<std::uint32_t>(world_size));
      unsigned char reply[4 + 128];
      if (write_full(fd.fd(), request, sizeof request, deadline) && read_full(fd.fd(), reply, sizeof reply, deadline) &&
          std::memcmp(reply, kMagic, 4) == 0) {
        UniqueIdBytes id{};
        std::memcpy(id.data(), reply + 4, id.size());
        return id;
      }
      last_error = "the connection closed before the id came";
    }
    if (RendezvousClock::now() >= deadline)
      throw_runtime("rendezvous: rank {} got no NCCL unique id from rank 0 at {}:{} before the deadline ({})", rank, host,
                    port, last_error);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace pw
