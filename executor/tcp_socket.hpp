#pragma once
// Blocking-with-deadline TCP helpers shared by the processes' TCP group (executor/tcp_process_group.hpp) and
// the NCCL id rendezvous (executor/cuda/host/rendezvous.hpp): every call that waits takes a deadline and
// reports failure instead of hanging past it. IPv4 and IPv6.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace pw {

using SocketClock = std::chrono::steady_clock;

// Owns a descriptor (closed on destruction); -1 when empty.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();

 private:
  int fd_ = -1;
};

// Milliseconds left until `deadline`, 0 once it passed (poll's timeout).
int remaining_ms(SocketClock::time_point deadline);

// Waits for `events` (POLLIN, POLLOUT) on `fd` until the deadline: false when it passed. Runtime error when
// poll itself fails.
bool wait_for(int fd, short events, SocketClock::time_point deadline);

// All `n` bytes, or false (peer closed, error or deadline).
bool read_full(int fd, void* data, size_t n, SocketClock::time_point deadline);
bool write_full(int fd, const void* data, size_t n, SocketClock::time_point deadline);

// What the user set a meeting address with, for messages: the launcher's variables, or an option.
struct AddressNames {
  std::string host = "MASTER_ADDR";
  std::string port = "MASTER_PORT";
};

// Listens on `port` at `host`'s address only (the first of its addresses that can be bound), so that
// nothing reaches the socket through another interface. Runtime error naming names.host when `host` is no
// address of this machine, and naming the port and names.port when the port is taken.
Socket listen_at(const std::string& host, int port, const AddressNames& names = {});
// "10.0.0.5:41234" ("[::1]:41234"): the other end of a connected socket, for messages.
std::string peer_text(int fd);
// The port a socket is bound to (IPv4 or IPv6).
int local_port(const Socket& socket);
// The next connection, or an empty socket when none came before the deadline (or it failed meanwhile).
Socket accept_before(const Socket& listener, SocketClock::time_point deadline);

// One attempt at every address of host:port; an empty socket with `error` set when none answered before
// the deadline (the caller retries: the listener may not be up yet). The socket is left non-blocking.
Socket connect_once(const std::string& host, int port, SocketClock::time_point deadline, std::string& error);

// Sets O_NONBLOCK; TCP_NODELAY (small messages leave at once).
void set_nonblocking(int fd);
void set_nodelay(int fd);

// Big-endian 32-bit integers on the wire.
void put_u32(unsigned char* at, std::uint32_t v);
std::uint32_t get_u32(const unsigned char* at);

}  // namespace pw
