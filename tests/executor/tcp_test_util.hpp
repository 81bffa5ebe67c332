#pragma once
// What the TCP group's tests share: deadlines, free ports, a group's config on localhost, and a client that
// plays a stranger (or a process that breaks the rules) on the group's port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "executor/tcp_frame.hpp"
#include "executor/tcp_process_group.hpp"
#include "executor/tcp_socket.hpp"

namespace pw::test {

inline Clock::time_point in_s(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// A port nothing listens on now (the kernel's pick for port 0, released at once).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

inline TcpGroupConfig config_for(int rank, int world, int port, double timeout_s = 10) {
  TcpGroupConfig c;
  c.rank = rank;
  c.world_size = world;
  c.host = "127.0.0.1";
  c.port = port;
  c.timeout_s = timeout_s;
  return c;
}

// A connection to 127.0.0.1:port, retried for up to 10 s while nothing listens there yet.
inline Socket connect_when_listening(int port) {
  const Clock::time_point deadline = in_s(10);
  std::string error;
  for (;;) {
    Socket s = connect_once("127.0.0.1", port, deadline, error);
    if (s.valid() || Clock::now() >= deadline) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// "127.0.0.1:41234": this end of a connection, as the other end names it.
inline std::string local_text(const Socket& s) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

// A frame header as a process would send it.
inline FrameHeader frame(FrameKind kind, int src, int dst, std::uint64_t length) {
  FrameHeader h;
  h.kind = static_cast<std::uint32_t>(kind);
  h.src = src;
  h.dst = dst;
  h.length = length;
  return h;
}

inline bool send_all(const Socket& s, const void* data, size_t n) { return write_full(s.fd(), data, n, in_s(5)); }

}  // namespace pw::test
