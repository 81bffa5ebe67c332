#include "executor/tcp_process_group.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "core/error.hpp"
#include "executor/job_token.hpp"
#include "executor/message_wire.hpp"
#include "executor/tcp_frame.hpp"
#include "executor/tcp_hello.hpp"
#include "executor/tcp_socket.hpp"
#include "executor/wait_notice.hpp"

namespace pw {
namespace {

// What process 0 holds of one process's gathers not yet taken: a run gathers twice (records, losses).
constexpr size_t kMostWaitingGathers = 16;
constexpr std::uint64_t kMostWaitingGatherBytes = std::uint64_t{1} << 31;

// Connections that may say their hello at once at process 0; more wait in the kernel's queue.
constexpr size_t kMostHandshakes = 256;
// Process 0's heartbeat: a process that hears nothing from it for 10 of them (or half its wait) names it.
constexpr auto kBeat = std::chrono::milliseconds(100);
constexpr auto kLongestSilence = std::chrono::seconds(1);
// A frame's body is read in pieces of at most this, and grows as its bytes arrive.
constexpr size_t kReadPiece = size_t{1} << 20;

Card my_card() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return {static_cast<int>(getpid()), host};
}

std::vector<std::byte> bytes_of(const void* data, size_t n) {
  std::vector<std::byte> out(n);
  if (n > 0) std::memcpy(out.data(), data, n);
  return out;
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A connection at process 0 that has not said its hello yet.
struct Handshake {
  Socket socket;
  std::string peer;
  std::array<unsigned char, kHelloBytes> hello{};
  size_t got = 0;
  Clock::time_point by;
};

}  // namespace

class TcpProcessGroup::World {
 public:
  explicit World(const TcpGroupConfig& config);
  ~World();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int port() const { return port_; }
  std::string failure_origin() {
    std::lock_guard lock(mutex_);
    return failure_from_ < 0 ? std::string() : fmt::format("process {} ({})", failure_from_, describe(failure_from_));
  }

  std::string describe(int rank) const {
    const Card& c = cards_[static_cast<size_t>(rank)];
    return fmt::format("pid {} on {}", c.pid, c.host);
  }

  // Queues a frame to process `dst` (through process 0 when neither end is process 0); never waits.
  void send(int dst, FrameKind kind, std::vector<std::byte> body) {
    std::lock_guard lock(mutex_);
    send_locked(dst, kind, std::move(body));
  }

  // Returns once `done` (called with the lock held) is true. Before it: abort() throws RunAborted, a
  // failure notice PeerFailed, a frame no process of this group sends a Runtime error naming its sender;
  // after it: a closed connection PeerLost, the deadline RecvTimeout, or PeerStalled naming the process
  // that stalled (`on`, `what`: what this wait is for, told to the others once it lasts; executor/wait_notice.hpp).
  void wait(Clock::time_point deadline, const std::function<bool()>& done, int on = kNotWaiting,
            const std::string& what = "") {
    WaitWatch watch(rank_, on, what, deadline);
    std::unique_lock lock(mutex_);
    for (;;) {
      if (aborted_) throw RunAborted();
      if (failure_) {
        aborted_ = true;
        throw PeerFailed(*failure_);
      }
      if (broken_) {
        aborted_ = true;
        throw_runtime("{}", *broken_);
      }
      if (done()) {
        if (auto ended = watch.ended()) send_locked(kEveryone, FrameKind::Wait, wait_notice_to_wire(*ended));
        return;
      }
      // A closed connection was read to its end first: what the peer sent before it went has been taken.
      for (int p = 0; p < size_; ++p)
        if (lost_[static_cast<size_t>(p)]) {
          aborted_ = true;
          throw PeerLost(p, describe(p));
        }
      const Clock::time_point now = Clock::now();
      if (auto notice = watch.due(now)) send_locked(kEveryone, FrameKind::Wait, wait_notice_to_wire(*notice));
      if (now >= watch.deadline()) {
        check_relay_locked(now, watch);
        watch.at_deadline(board_);  // throws, or waits a little longer for the report of the one who should
        continue;
      }
      changed_.wait_until(lock, watch.next_look());
    }
  }

  void abort() {
    {
      std::lock_guard lock(mutex_);
      aborted_ = true;
    }
    changed_.notify_all();
  }

  void announce_failure(const std::string& message) {
    std::lock_guard lock(mutex_);
    if (announced_) return;
    announced_ = true;
    send_locked(kEveryone, FrameKind::Failure, bytes_of(message.data(), std::min<size_t>(message.size(), kLongestNotice)));
  }

  void end_others(int code) {
    const std::int32_t c = code;
    std::unique_lock lock(mutex_);
    send_locked(kEveryone, FrameKind::End, bytes_of(&c, sizeof c));
    drain_locked(lock, std::chrono::seconds(1));
  }

  // Barrier, gather and broadcast state (under the lock).
  std::mutex mutex_;
  std::vector<long> arrivals_;  // at process 0: barriers each process arrived at
  long releases_ = 0;           // elsewhere: barriers process 0 released
  long barriers_ = 0;           // barriers this process entered
  std::vector<std::deque<std::vector<std::byte>>> gathered_;  // at process 0, by sender
  std::deque<std::vector<std::byte>> broadcasts_;
  std::deque<std::pair<int, std::vector<std::byte>>> tensors_;  // (sender, bytes) not yet taken by a transport
  Clock::time_point last_meeting_ = Clock::now();

  void send_locked(int dst, FrameKind kind, std::vector<std::byte> body);

 private:
  struct Peer {
    Socket socket;
    bool open = false;
    std::deque<std::vector<std::byte>> out;  // frames' headers and bodies, in order
    size_t out_at = 0;                       // bytes of out.front() already sent
    unsigned char head[sizeof(FrameHeader)] = {};
    size_t head_got = 0;
    FrameHeader header;          // of the frame whose body is being read
    std::vector<std::byte> body;  // grows as the body's bytes arrive
    size_t body_got = 0;
  };

  void join_as_first(const TcpGroupConfig& config, Clock::time_point deadline);
  void join_as_other(const TcpGroupConfig& config, Clock::time_point deadline);
  void start(std::vector<Socket> sockets);
  void io_loop();
  void queue_locked(int to, const FrameHeader& h, std::vector<std::byte> body);
  void flush_locked(int p);
  void read_locked(int p);
  void dispatch_locked(int from, const FrameHeader& h, std::vector<std::byte> body);
  void close_locked(int p);
  // A frame process `p` should never have sent: this process's waits fail naming it; its connection closes.
  void break_locked(int p, const std::string& fault);
  void beat_locked();
  // Elsewhere than process 0, at a deadline: PeerStalled when process 0 has been silent (see kLongestSilence).
  void check_relay_locked(Clock::time_point now, const WaitWatch& watch) const;
  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
  // Waits (at most `limit`) until every queued byte left.
  void drain_locked(std::unique_lock<std::mutex>& lock, Clock::duration limit);
  bool queues_empty_locked() const {
    return std::all_of(peers_.begin(), peers_.end(), [](const Peer& p) { return !p.open || p.out.empty(); });
  }
  [[noreturn]] void end_now_locked(int from, int code);

  int rank_ = 0;
  int size_ = 1;
  int port_ = 0;
  std::vector<Card> cards_;
  std::vector<Peer> peers_;  // by process: at process 0 every other, elsewhere process 0 only
  std::vector<bool> lost_;   // whose connection closed
  WaitBoard board_;
  Clock::time_point last_heard_ = Clock::now();  // elsewhere than process 0: its last bytes
  Clock::time_point next_beat_ = Clock::now();    // at process 0
  std::condition_variable changed_;
  std::optional<std::string> failure_;
  int failure_from_ = -1;  // the process whose announcement failure_ is
  std::optional<std::string> broken_;
  bool aborted_ = false;
  bool announced_ = false;
  bool stop_ = false;
  int wake_fd_ = -1;
  std::thread io_;
};

TcpProcessGroup::World::World(const TcpGroupConfig& config)
    : rank_(config.rank), size_(config.world_size), board_(std::max(1, std::min(config.world_size, kMostProcesses))) {
  if (size_ < 1 || size_ > kMostProcesses || rank_ < 0 || rank_ >= size_)
    throw_runtime("process group: rank {} of {} processes is no process of a group of 1 to {}", rank_, size_,
                  kMostProcesses);
  cards_.resize(static_cast<size_t>(size_));
  cards_[static_cast<size_t>(rank_)] = my_card();
  lost_.assign(static_cast<size_t>(size_), false);
  arrivals_.assign(static_cast<size_t>(size_), 0);
  gathered_.resize(static_cast<size_t>(size_));
  peers_ = std::vector<Peer>(static_cast<size_t>(size_));
  const Clock::time_point deadline = after(config.timeout_s);
  port_ = config.port;
  if (rank_ == 0)
    join_as_first(config, deadline);
  else
    join_as_other(config, deadline);
}

void TcpProcessGroup::World::join_as_first(const TcpGroupConfig& config, Clock::time_point deadline) {
  const Socket listener = listen_at(config.host, config.port, config.names);
  set_nonblocking(listener.fd());
  port_ = local_port(listener);
  std::vector<Socket> joined(static_cast<size_t>(size_));
  std::set<int> missing;
  for (int p = 1; p < size_; ++p) missing.insert(p);
  std::vector<Handshake> pending;

  // The same answer to every process that joined (and the one at fault), then the same BadInput here.
  const auto refuse = [&](Socket& offender, const std::string& message) {
    const std::vector<unsigned char> answer = refusal_to_wire(message);
    const auto by = std::min(deadline, Clock::now() + std::chrono::seconds(2));
    write_full(offender.fd(), answer.data(), answer.size(), by);
    for (Socket& s : joined)
      if (s.valid()) write_full(s.fd(), answer.data(), answer.size(), by);
    throw_bad_input("{}", message);
  };
  // A stranger is told nothing of the job and held up no one: dropped, and said so here.
  const auto drop = [&](Handshake& h, const std::string& why) {
    std::cerr << fmt::format("warning: process 0 dropped a connection from {} to port {}: {}\n", h.peer, port_, why);
    h.socket.reset();
  };
  const auto take_hello = [&](Handshake& h) {
    std::string why;
    const std::optional<Hello> hello = hello_from_wire(h.hello.data(), config.token, why);
    if (!hello) {
      if (why.starts_with(kAnotherJobToken)) {
        // Told why, so that a process of this job started with another token fails at once, naming the fix.
        const std::vector<unsigned char> answer = refusal_to_wire(fmt::format(
            "job token: this process's differs from process 0's, which comes from {}; start every process of the job "
            "with the same {}",
            config.token_source, config.token_source));
        write_full(h.socket.fd(), answer.data(), answer.size(), Clock::now());
        why += fmt::format(" (this job's comes from {})", config.token_source);
      }
      drop(h, why);
      return;
    }
    if (hello->world != size_)
      refuse(h.socket, fmt::format("{}: process {} was started for {} processes and process 0 for {}; start every "
                                   "process with the same {}",
                                   config.world_variable, hello->rank, hello->world, size_, config.world_variable));
    if (hello->rank < 1 || hello->rank >= size_)
      refuse(h.socket, fmt::format("{}: a process says it is rank {}, outside 1..{} of the {} processes; give each "
                                   "process its own rank below {}",
                                   config.rank_variable, hello->rank, size_ - 1, size_, size_));
    if (joined[static_cast<size_t>(hello->rank)].valid())
      refuse(h.socket, fmt::format("{}: two processes say they are rank {}; give each process its own rank",
                                   config.rank_variable, hello->rank));
    cards_[static_cast<size_t>(hello->rank)] = hello->card;
    joined[static_cast<size_t>(hello->rank)] = std::move(h.socket);
    missing.erase(hello->rank);
  };

  while (!missing.empty()) {
    if (Clock::now() >= deadline) {
      std::string list;
      for (int p : missing) list += fmt::format("{}{}", list.empty() ? "" : ", ", p);
      throw_runtime("process 0 of {}: process{} {} did not join at port {} within {:g} s; did {} start, with "
                    "{} naming this host?",
                    size_, missing.size() == 1 ? "" : "es", list, port_, config.timeout_s,
                    missing.size() == 1 ? "it" : "they", config.names.host);
    }
    // Every connection's hello at once, each against its own deadline: a silent one delays nobody.
    std::vector<pollfd> fds{{listener.fd(), static_cast<short>(pending.size() < kMostHandshakes ? POLLIN : 0), 0}};
    Clock::time_point look = deadline;
    for (const Handshake& h : pending) {
      fds.push_back({h.socket.fd(), POLLIN, 0});
      look = std::min(look, h.by);
    }
    if (::poll(fds.data(), fds.size(), std::max(1, remaining_ms(look))) < 0 && errno != EINTR)
      throw_runtime("process group: poll failed: {}", std::strerror(errno));
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < pending.size(); ++i) {
      Handshake& h = pending[i];
      if (fds[i + 1].revents) {
        const ssize_t got = ::recv(h.socket.fd(), h.hello.data() + h.got, kHelloBytes - h.got, 0);
        if (got > 0) h.got += static_cast<size_t>(got);
        else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
          drop(h, fmt::format("it closed after {} of the {} bytes of a hello", h.got, kHelloBytes));
      }
      if (h.socket.valid() && h.got == kHelloBytes)
        take_hello(h);
      else if (h.socket.valid() && now >= h.by)
        drop(h, fmt::format("no hello within {:g} s ({} of its {} bytes)", config.handshake_s, h.got, kHelloBytes));
    }
    std::erase_if(pending, [](const Handshake& h) { return !h.socket.valid(); });
    if (fds[0].revents & POLLIN) {
      while (pending.size() < kMostHandshakes) {
        Socket client(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!client.valid()) break;
        Handshake& h = pending.emplace_back();
        h.peer = peer_text(client.fd());
        h.socket = std::move(client);
        h.by = std::min(deadline, now + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(config.handshake_s)));
      }
    }
  }
  for (Handshake& h : pending) drop(h, "every process had joined");

  const std::vector<unsigned char> welcome = welcome_to_wire(cards_);
  // A process that went meanwhile is found at the first wait (its connection closed).
  for (int p = 1; p < size_; ++p) write_full(joined[static_cast<size_t>(p)].fd(), welcome.data(), welcome.size(), deadline);
  start(std::move(joined));
}

void TcpProcessGroup::World::join_as_other(const TcpGroupConfig& config, Clock::time_point deadline) {
  const auto hello = hello_to_wire(Hello{config.token, rank_, size_, cards_[static_cast<size_t>(rank_)]});
  std::string last_error = "no attempt";
  for (;;) {
    Socket s = connect_once(config.host, config.port, deadline, last_error);
    unsigned char head[kAnswerHeadBytes];
    if (s.valid() && write_full(s.fd(), hello.data(), hello.size(), deadline) &&
        read_full(s.fd(), head, sizeof head, deadline)) {
      if (const std::optional<AnswerHead> answer = answer_head_from_wire(head, size_, last_error)) {
        std::vector<unsigned char> body(answer->length);  // checked against what such an answer holds
        if (!read_full(s.fd(), body.data(), body.size(), deadline)) {
          last_error = "process 0's answer ended early";
        } else if (!answer->welcome) {
          throw_bad_input("{}", std::string(reinterpret_cast<const char*>(body.data()), body.size()));
        } else {
          const std::vector<Card> cards = cards_from_wire(body, size_);
          for (int p = 0; p < size_; ++p)
            if (p != rank_) cards_[static_cast<size_t>(p)] = cards[static_cast<size_t>(p)];
          std::vector<Socket> sockets(static_cast<size_t>(size_));
          sockets[0] = std::move(s);
          start(std::move(sockets));
          return;
        }
      }
    } else if (s.valid() && Clock::now() < deadline) {
      last_error = "the connection closed before process 0 answered";  // at the deadline the last reason stands
    }
    if (Clock::now() >= deadline)
      throw_runtime("process {} of {} could not join process 0 at {}:{} within {:g} s ({}); is process 0 running, and are "
                    "{} and {} the same for every process?",
                    rank_, size_, config.host, config.port, config.timeout_s, last_error, config.names.host,
                    config.names.port);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void TcpProcessGroup::World::start(std::vector<Socket> sockets) {
  for (int p = 0; p < size_; ++p) {
    Socket& s = sockets[static_cast<size_t>(p)];
    if (!s.valid()) continue;
    set_nonblocking(s.fd());
    set_nodelay(s.fd());
    peers_[static_cast<size_t>(p)].socket = std::move(s);
    peers_[static_cast<size_t>(p)].open = true;
  }
  last_heard_ = Clock::now();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw_runtime("process group: eventfd failed: {}", std::strerror(errno));
  io_ = std::thread([this] { io_loop(); });
}

TcpProcessGroup::World::~World() {
  {
    std::unique_lock lock(mutex_);
    drain_locked(lock, std::chrono::seconds(2));
    stop_ = true;
  }
  if (io_.joinable()) {
    wake();
    io_.join();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void TcpProcessGroup::World::drain_locked(std::unique_lock<std::mutex>& lock, Clock::duration limit) {
  if (!io_.joinable()) return;
  wake();
  changed_.wait_until(lock, Clock::now() + limit, [&] { return queues_empty_locked(); });
}

void TcpProcessGroup::World::send_locked(int dst, FrameKind kind, std::vector<std::byte> body) {
  if (body.size() > longest_body(static_cast<std::uint32_t>(kind)))
    throw_runtime("process group: a message of {} bytes is more than the {} one frame carries", body.size(),
                  longest_body(static_cast<std::uint32_t>(kind)));
  FrameHeader h;
  h.kind = static_cast<std::uint32_t>(kind);
  h.src = rank_;
  h.dst = dst;
  h.length = body.size();
  if (dst == kEveryone && rank_ == 0) {
    for (int p = 1; p < size_; ++p) queue_locked(p, h, body);
  } else if (dst == kEveryone || rank_ != 0) {
    queue_locked(0, h, std::move(body));  // process 0 passes it on
  } else {
    queue_locked(dst, h, std::move(body));
  }
}

void TcpProcessGroup::World::queue_locked(int to, const FrameHeader& h, std::vector<std::byte> body) {
  Peer& peer = peers_[static_cast<size_t>(to)];
  if (!peer.open) return;  // gone: what it would have got no longer matters
  const bool idle = peer.out.empty();
  peer.out.push_back(bytes_of(&h, sizeof h));
  if (!body.empty()) peer.out.push_back(std::move(body));
  if (!idle) return;
  flush_locked(to);
  if (peer.open && !peer.out.empty()) wake();  // the I/O thread finishes it when the socket has room
}

void TcpProcessGroup::World::flush_locked(int p) {
  Peer& peer = peers_[static_cast<size_t>(p)];
  while (peer.open && !peer.out.empty()) {
    const std::vector<std::byte>& front = peer.out.front();
    const ssize_t put = ::send(peer.socket.fd(), front.data() + peer.out_at, front.size() - peer.out_at, MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      close_locked(p);
      return;
    }
    peer.out_at += static_cast<size_t>(put);
    if (peer.out_at == front.size()) {
      peer.out.pop_front();
      peer.out_at = 0;
    }
  }
  if (peer.out.empty()) changed_.notify_all();
}

void TcpProcessGroup::World::close_locked(int p) {
  Peer& peer = peers_[static_cast<size_t>(p)];
  if (!peer.open) return;
  peer.open = false;
  peer.out.clear();
  lost_[static_cast<size_t>(p)] = true;
  changed_.notify_all();
}

void TcpProcessGroup::World::break_locked(int p, const std::string& fault) {
  if (!broken_)
    broken_ = fmt::format("process group: the connection to rank {} ({}) carried {}; do all processes run the same "
                          "pipewright build?",
                          p, describe(p), fault);
  Peer& peer = peers_[static_cast<size_t>(p)];
  peer.open = false;
  peer.out.clear();
  peer.socket.reset();
  changed_.notify_all();
}

void TcpProcessGroup::World::read_locked(int p) {
  Peer& peer = peers_[static_cast<size_t>(p)];
  while (peer.open) {
    const bool in_head = peer.head_got < sizeof(FrameHeader);
    if (!in_head && peer.body_got == peer.header.length) {
      std::vector<std::byte> body = std::move(peer.body);
      body.resize(peer.body_got);
      peer.body = {};
      peer.head_got = 0;
      peer.body_got = 0;
      dispatch_locked(p, peer.header, std::move(body));
      continue;
    }
    void* at = nullptr;
    size_t want = 0;
    if (in_head) {
      at = peer.head + peer.head_got;
      want = sizeof(FrameHeader) - peer.head_got;
    } else {
      // The buffer grows with the bytes that came (doubling), never to a length the header merely announced.
      want = static_cast<size_t>(std::min<std::uint64_t>(peer.header.length - peer.body_got, kReadPiece));
      if (peer.body.size() < peer.body_got + want)
        peer.body.resize(static_cast<size_t>(
            std::min<std::uint64_t>(peer.header.length, std::max(peer.body_got + want, 2 * peer.body.size()))));
      at = peer.body.data() + peer.body_got;
    }
    const ssize_t got = ::recv(peer.socket.fd(), at, want, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got <= 0) {
      close_locked(p);
      return;
    }
    if (p == 0) last_heard_ = Clock::now();
    if (!in_head) {
      peer.body_got += static_cast<size_t>(got);
      continue;
    }
    peer.head_got += static_cast<size_t>(got);
    if (peer.head_got < sizeof(FrameHeader)) continue;
    std::memcpy(&peer.header, peer.head, sizeof(FrameHeader));
    const std::string fault = frame_fault(peer.header, p, rank_, size_);
    if (!fault.empty()) {
      break_locked(p, fault);
      return;
    }
  }
}

void TcpProcessGroup::World::dispatch_locked(int from, const FrameHeader& h, std::vector<std::byte> body) {
  const auto kind = static_cast<FrameKind>(h.kind);
  const int src = h.src;  // at process 0 the connection's own process (frame_fault checked)
  if (rank_ == 0 && h.dst != 0 && h.dst != kEveryone) {
    queue_locked(h.dst, h, std::move(body));
    return;
  }
  if (rank_ == 0 && h.dst == kEveryone)
    for (int p = 1; p < size_; ++p)
      if (p != src) queue_locked(p, h, body);
  switch (kind) {
    case FrameKind::Tensor:
      tensors_.emplace_back(src, std::move(body));
      break;
    case FrameKind::Failure:
      if (!failure_) {
        failure_ = std::string(reinterpret_cast<const char*>(body.data()), body.size());
        failure_from_ = src;
      }
      break;
    case FrameKind::Arrive:
      ++arrivals_[static_cast<size_t>(src)];
      break;
    case FrameKind::Release:
      ++releases_;
      break;
    case FrameKind::Gather: {
      // A process sends one gather per gather call and process 0 takes one from each per call, so a process
      // runs at most a few ahead; more is a process that floods process 0's memory until the timeout.
      auto& queue = gathered_[static_cast<size_t>(src)];
      std::uint64_t waiting = body.size();
      for (const std::vector<std::byte>& b : queue) waiting += b.size();
      if (queue.size() >= kMostWaitingGathers || waiting > kMostWaitingGatherBytes) {
        break_locked(from, fmt::format("{} gathers of {} bytes together before process 0 took them (at most {} and {} "
                                       "bytes wait)",
                                       queue.size() + 1, waiting, kMostWaitingGathers, kMostWaitingGatherBytes));
        return;
      }
      queue.push_back(std::move(body));
      break;
    }
    case FrameKind::Broadcast:
      broadcasts_.push_back(std::move(body));
      break;
    case FrameKind::Heartbeat:
      break;
    case FrameKind::Wait: {
      const std::optional<WaitNotice> notice = wait_notice_from_wire(body, size_);
      if (!notice || notice->waiter != src) {
        break_locked(from, fmt::format("a wait notice that does not come from rank {}", src));
        return;
      }
      board_.note(*notice, Clock::now());
      break;
    }
    case FrameKind::End: {
      std::int32_t code = 1;
      if (body.size() == sizeof code) std::memcpy(&code, body.data(), sizeof code);
      end_now_locked(from, code);
    }
  }
  changed_.notify_all();
}

void TcpProcessGroup::World::beat_locked() {
  const Clock::time_point now = Clock::now();
  if (rank_ != 0 || now < next_beat_) return;
  next_beat_ = now + kBeat;
  FrameHeader h;
  h.kind = static_cast<std::uint32_t>(FrameKind::Heartbeat);
  h.src = 0;
  for (int p = 1; p < size_; ++p) {
    h.dst = p;
    // Bytes still queued will show process 0 alive as they arrive.
    if (peers_[static_cast<size_t>(p)].out.empty()) queue_locked(p, h, {});
  }
}

void TcpProcessGroup::World::check_relay_locked(Clock::time_point now, const WaitWatch& watch) const {
  if (rank_ == 0) return;
  const Clock::duration silent = now - last_heard_;
  if (silent >= std::min<Clock::duration>(kLongestSilence, watch.timeout() / 2))
    throw PeerStalled(fmt::format("process 0 ({}), through which every message passes, sent nothing for {:.2g} s: rank 0 "
                                  "stalled, or its host is out of reach",
                                  describe(0), seconds(silent)));
}

void TcpProcessGroup::World::end_now_locked(int from, int code) {
  // Process 0 has queued the word to the others above; it leaves with them before this process ends.
  const Clock::time_point by = Clock::now() + std::chrono::seconds(1);
  for (int p = 0; p < size_; ++p) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    while (p != from && peer.open && !peer.out.empty() && Clock::now() < by) {
      flush_locked(p);
      if (peer.open && !peer.out.empty()) wait_for(peer.socket.fd(), POLLOUT, by);
    }
  }
  std::fflush(nullptr);
  std::_Exit(code);
}

void TcpProcessGroup::World::io_loop() {
  std::vector<pollfd> fds;
  std::vector<int> who;
  for (;;) {
    fds.clear();
    who.clear();
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      beat_locked();
      fds.push_back({wake_fd_, POLLIN, 0});
      who.push_back(-1);
      for (int p = 0; p < size_; ++p) {
        const Peer& peer = peers_[static_cast<size_t>(p)];
        if (!peer.open) continue;
        fds.push_back({peer.socket.fd(), static_cast<short>(POLLIN | (peer.out.empty() ? 0 : POLLOUT)), 0});
        who.push_back(p);
      }
    }
    const int n = ::poll(fds.data(), fds.size(), rank_ == 0 ? std::max(1, remaining_ms(next_beat_)) : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::lock_guard lock(mutex_);
      for (int p = 0; p < size_; ++p) close_locked(p);
      return;
    }
    if (fds[0].revents) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof count);
    }
    std::lock_guard lock(mutex_);
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents || !peers_[static_cast<size_t>(who[i])].open) continue;
      if (fds[i].revents & POLLOUT) flush_locked(who[i]);
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_locked(who[i]);
    }
  }
}

namespace {

class TcpTransport : public Transport {
 public:
  TcpTransport(std::shared_ptr<TcpProcessGroup::World> world, const Backend& backend)
      : world_(std::move(world)), backend_(backend) {}

  void send(int src, int dst, const MessageKey& key, Message message) override {
    if (src != world_->rank())
      throw_runtime("rank {} cannot send from process {}: a process hosts one rank", src, world_->rank());
    std::lock_guard lock(world_->mutex_);
    world_->send_locked(dst, FrameKind::Tensor, message_to_wire(key, message, world_->last_meeting_));
  }

  Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) override {
    if (dst != world_->rank())
      throw_runtime("rank {} cannot receive in process {}: a process hosts one rank", dst, world_->rank());
    Message out;
    world_->wait(
        deadline,
        [&] {
          take_arrivals_locked();
          return take_message(mailbox_, src, key, out);
        },
        src, to_text(Action{key.op, key.stage, key.microbatch}));
    return out;
  }

  void abort() override { world_->abort(); }
  void announce_failure(const std::string& message) override { world_->announce_failure(message); }

 private:
  void take_arrivals_locked() {
    while (!world_->tensors_.empty()) {
      auto [from, bytes] = std::move(world_->tensors_.front());
      world_->tensors_.pop_front();
      WireMessage w = message_from_wire(bytes, backend_, world_->last_meeting_, from);
      mailbox_[{from, w.key}] = std::move(w.message);
    }
  }

  std::shared_ptr<TcpProcessGroup::World> world_;
  const Backend& backend_;
  Mailbox mailbox_;
};

}  // namespace

TcpProcessGroup::TcpProcessGroup(const TcpGroupConfig& config) : world_(std::make_shared<World>(config)) {}

TcpProcessGroup::~TcpProcessGroup() = default;

int TcpProcessGroup::rank() const { return world_->rank(); }
int TcpProcessGroup::size() const { return world_->size(); }
int TcpProcessGroup::port() const { return world_->port(); }
std::string TcpProcessGroup::describe(int rank) const { return world_->describe(rank); }
std::string TcpProcessGroup::failure_origin() const { return world_->failure_origin(); }
void TcpProcessGroup::announce_failure(const std::string& message) { world_->announce_failure(message); }
void TcpProcessGroup::end_others(int code) { world_->end_others(code); }

std::unique_ptr<Transport> TcpProcessGroup::transport_for(const Backend& backend) {
  return std::make_unique<TcpTransport>(world_, backend);
}

Clock::time_point TcpProcessGroup::barrier(Clock::time_point deadline) {
  World& w = *world_;
  long round = 0;
  {
    std::lock_guard lock(w.mutex_);
    round = ++w.barriers_;
    if (w.rank() != 0) w.send_locked(0, FrameKind::Arrive, {});
  }
  if (w.rank() == 0) {
    w.wait(
        deadline,
        [&] { return std::all_of(w.arrivals_.begin() + 1, w.arrivals_.end(), [&](long a) { return a >= round; }); },
        kAtMeeting, "the meeting");
    std::lock_guard lock(w.mutex_);
    for (int p = 1; p < w.size(); ++p) w.send_locked(p, FrameKind::Release, {});
  } else {
    w.wait(deadline, [&] { return w.releases_ >= round; }, kAtMeeting, "the meeting");
  }
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(w.mutex_);
  w.last_meeting_ = now;
  return now;
}

std::vector<std::vector<std::byte>> TcpProcessGroup::gather(std::vector<std::byte> bytes, Clock::time_point deadline) {
  World& w = *world_;
  std::vector<std::vector<std::byte>> out;
  if (w.rank() != 0) {
    w.send(0, FrameKind::Gather, std::move(bytes));
    return out;
  }
  w.wait(deadline, [&] {
    return std::all_of(w.gathered_.begin() + 1, w.gathered_.end(), [](const auto& q) { return !q.empty(); });
  });
  std::lock_guard lock(w.mutex_);
  out.resize(static_cast<size_t>(w.size()));
  out[0] = std::move(bytes);
  for (int p = 1; p < w.size(); ++p) {
    auto& q = w.gathered_[static_cast<size_t>(p)];
    out[static_cast<size_t>(p)] = std::move(q.front());
    q.pop_front();
  }
  return out;
}

std::vector<std::byte> TcpProcessGroup::broadcast(std::vector<std::byte> bytes, Clock::time_point deadline) {
  World& w = *world_;
  if (w.rank() == 0) {
    std::lock_guard lock(w.mutex_);
    for (int p = 1; p < w.size(); ++p) w.send_locked(p, FrameKind::Broadcast, bytes);
    return bytes;
  }
  std::vector<std::byte> out;
  w.wait(deadline, [&] {
    if (w.broadcasts_.empty()) return false;
    out = std::move(w.broadcasts_.front());
    w.broadcasts_.pop_front();
    return true;
  });
  return out;
}

namespace {

std::atomic<TcpProcessGroup*> g_job_group{nullptr};

// A launched job's group: one more meeting before the connections close, and end_job_now reaches the others.
class JobTcpGroup : public TcpProcessGroup {
 public:
  JobTcpGroup(const TcpGroupConfig& config, double timeout_s) : TcpProcessGroup(config), timeout_s_(timeout_s) {
    g_job_group = this;
  }

  // Every process meets once more before it closes its connections: none ends while another still waits on
  // it, so a connection that closes is always a process that failed. Left by an exception: the caller ends
  // the job.
  ~JobTcpGroup() override {
    if (std::uncaught_exceptions() > 0) return;
    meet_before_leaving(*this, timeout_s_);
    g_job_group = nullptr;
  }

 private:
  double timeout_s_;
};

}  // namespace

TcpGroupConfig tcp_meeting_config(const LaunchEnv& env, const std::string& host, int port,
                                  const AddressNames& names) {
  TcpGroupConfig c;
  c.names = names;
  c.rank = env.rank;
  c.world_size = env.world_size;
  c.host = host;
  c.port = port;
  if (env.launcher == "slurm") {
    c.world_variable = "SLURM_NTASKS";
    c.rank_variable = "SLURM_PROCID";
  } else if (env.launcher == "openmpi") {
    c.world_variable = "OMPI_COMM_WORLD_SIZE";
    c.rank_variable = "OMPI_COMM_WORLD_RANK";
  }
  const JobToken token = job_token(env, host, port, fmt::format("{} and {}", names.host, names.port));
  c.token = token.digest;
  c.token_source = token.source;
  return c;
}

TcpGroupConfig tcp_group_config(const LaunchEnv& env, double timeout_s) {
  if (env.master_addr.empty() || env.master_port == 0)
    throw_bad_input("{}: not set; the processes {} starts meet over TCP at MASTER_ADDR:MASTER_PORT: export "
                    "MASTER_ADDR=<the host of process 0> and MASTER_PORT=<a free port> for every process",
                    env.master_addr.empty() ? "MASTER_ADDR" : "MASTER_PORT", env.launcher);
  int port = env.master_port;
  if (env.launcher == "torchrun") {
    port = env.master_port + 1;
    if (port > 65535)
      throw_bad_input("MASTER_PORT: {} leaves no port above it, where the processes meet (torchrun's agent keeps "
                      "MASTER_PORT); set MASTER_PORT to 65534 or less",
                      env.master_port);
  }
  TcpGroupConfig c = tcp_meeting_config(env, env.master_addr, port, AddressNames{});
  c.timeout_s = timeout_s;
  return c;
}

std::unique_ptr<ProcessGroup> join_tcp_processes(const LaunchEnv& env, double timeout_s) {
  return std::make_unique<JobTcpGroup>(tcp_group_config(env, timeout_s), timeout_s);
}

void end_tcp_job(int code) {
  TcpProcessGroup* group = g_job_group.exchange(nullptr);
  if (group && code != 0) group->end_others(code);
}

}  // namespace pw
