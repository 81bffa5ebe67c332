#include "executor/tcp_socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace pw {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Connects to one address before the deadline; -1 with errno set otherwise.
int connect_before(const addrinfo& a, SocketClock::time_point deadline) {
  const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) return -1;
  set_nonblocking(fd);
  if (::connect(fd, a.ai_addr, a.ai_addrlen) == 0) return fd;
  if (errno == EINPROGRESS && wait_for(fd, POLLOUT, deadline)) {
    int error = 0;
    socklen_t len = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error == 0) return fd;
    errno = error;
  } else if (errno == EINPROGRESS) {
    errno = ETIMEDOUT;
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return -1;
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int remaining_ms(SocketClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SocketClock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

bool wait_for(int fd, short events, SocketClock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) throw_runtime("poll failed: {}", errno_text());
  }
}

bool read_full(int fd, void* data, size_t n, SocketClock::time_point deadline) {
  auto* at = static_cast<unsigned char*>(data);
  size_t done = 0;
  while (done < n) {
    if (!wait_for(fd, POLLIN, deadline)) return false;
    const ssize_t got = ::recv(fd, at + done, n - done, 0);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;
    }
    done += static_cast<size_t>(got);
  }
  return true;
}

bool write_full(int fd, const void* data, size_t n, SocketClock::time_point deadline) {
  const auto* at = static_cast<const unsigned char*>(data);
  size_t done = 0;
  while (done < n) {
    if (!wait_for(fd, POLLOUT, deadline)) return false;
    const ssize_t put = ::send(fd, at + done, n - done, MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;
    }
    done += static_cast<size_t>(put);
  }
  return true;
}

Socket listen_at(const std::string& host, int port, const AddressNames& names) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (gai != 0)
    throw_runtime("cannot listen at {} {}: {}; set {} to process 0's host", names.host, host, ::gai_strerror(gai),
                  names.host);
  std::string error;
  Socket out;
  for (addrinfo* a = found; a && !out.valid(); a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) continue;
    const int yes = 1;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(s.fd(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.fd(), 128) == 0)
      out = std::move(s);
    else if (error.empty() || errno == EADDRINUSE)
      error = errno == EADDRINUSE ? "in use" : errno_text();
  }
  ::freeaddrinfo(found);
  if (out.valid()) return out;
  if (error == "in use")
    throw_runtime("cannot listen on port {}: {}; is another job using it? set another {}", port,
                  std::strerror(EADDRINUSE), names.port);
  throw_runtime("cannot listen at {} {} port {}: {}; {} must name process 0's host", names.host, host, port, error,
                names.host);
}

int local_port(const Socket& socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
}

std::string peer_text(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "an unknown address";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    return std::string("[") + text + "]:" + std::to_string(ntohs(a.sin6_port));
  }
  const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(a.sin_port));
}

Socket accept_before(const Socket& listener, SocketClock::time_point deadline) {
  if (!wait_for(listener.fd(), POLLIN, deadline)) return Socket();
  return Socket(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
}

Socket connect_once(const std::string& host, int port, SocketClock::time_point deadline, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (gai != 0) {
    error = ::gai_strerror(gai);
    return Socket();
  }
  Socket out;
  for (addrinfo* a = found; a && !out.valid(); a = a->ai_next) {
    out = Socket(connect_before(*a, deadline));
    if (!out.valid()) error = errno_text();
  }
  ::freeaddrinfo(found);
  return out;
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void set_nodelay(int fd) {
  const int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
}

void put_u32(unsigned char* at, std::uint32_t v) {
  const std::uint32_t be = htonl(v);
  std::memcpy(at, &be, 4);
}

std::uint32_t get_u32(const unsigned char* at) {
  std::uint32_t be = 0;
  std::memcpy(&be, at, 4);
  return ntohl(be);
}

}  // namespace pw
