#include "executor/tcp_process_group.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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
#include "executor/message_wire.hpp"
#include "executor/tcp_socket.hpp"

namespace pw {
namespace {

enum class Kind : std::uint32_t { Tensor = 1, Failure, Arrive, Release, Gather, Broadcast, End };
constexpr std::int32_t kEveryone = -1;

// The front of every frame (both ends run the same build, as with MPI's messages).
struct FrameHeader {
  std::uint32_t kind = 0;
  std::int32_t src = 0;
  std::int32_t dst = 0;
  std::uint32_t reserved = 0;
  std::uint64_t length = 0;
};

// The join: a hello from each process, one answer from process 0.
constexpr unsigned char kMagic[4] = {'P', 'W', 'T', 'G'};
constexpr std::uint32_t kVersion = 1;
constexpr size_t kHostBytes = 64;
constexpr size_t kCardBytes = 4 + kHostBytes;             // pid, host
constexpr size_t kHelloBytes = 4 + 4 + 4 + 4 + kCardBytes;  // magic, version, rank, world, card
constexpr size_t kAnswerBytes = 4 + 4 + 4;                // magic, status (0 welcome, 1 refused), length

struct Card {
  int pid = 0;
  std::string host;
};

void put_card(unsigned char* at, const Card& c) {
  put_u32(at, static_cast<std::uint32_t>(c.pid));
  std::memset(at + 4, 0, kHostBytes);
  std::memcpy(at + 4, c.host.data(), std::min(c.host.size(), kHostBytes - 1));
}

Card get_card(const unsigned char* at) {
  const char* host = reinterpret_cast<const char*>(at + 4);
  return {static_cast<int>(get_u32(at)), std::string(host, strnlen(host, kHostBytes))};
}

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

}  // namespace

class TcpProcessGroup::World {
 public:
  explicit World(const TcpGroupConfig& config);
  ~World();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int port() const { return port_; }
  std::string describe(int rank) const {
    const Card& c = cards_[static_cast<size_t>(rank)];
    return fmt::format("pid {} on {}", c.pid, c.host);
  }

  // Queues a frame to process `dst` (through process 0 when neither end is process 0); never waits.
  void send(int dst, Kind kind, std::vector<std::byte> body) {
    std::lock_guard lock(mutex_);
    send_locked(dst, kind, std::move(body));
  }

  // Returns once `done` (called with the lock held) is true. Before it: abort() throws RunAborted, a
  // failure notice PeerFailed; after it: a closed connection PeerLost, the deadline RecvTimeout.
  void wait(Clock::time_point deadline, const std::function<bool()>& done) {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (aborted_) throw RunAborted();
      if (failure_) {
        aborted_ = true;
        throw PeerFailed(*failure_);
      }
      if (done()) return;
      // A closed connection was read to its end first: what the peer sent before it went has been taken.
      for (int p = 0; p < size_; ++p)
        if (lost_[static_cast<size_t>(p)]) {
          aborted_ = true;
          throw PeerLost(p, describe(p));
        }
      if (Clock::now() >= deadline) throw RecvTimeout();
      changed_.wait_until(lock, deadline);
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
    send_locked(kEveryone, Kind::Failure, bytes_of(message.data(), message.size()));
  }

  void end_others(int code) {
    const std::int32_t c = code;
    std::unique_lock lock(mutex_);
    send_locked(kEveryone, Kind::End, bytes_of(&c, sizeof c));
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

  void send_locked(int dst, Kind kind, std::vector<std::byte> body);

 private:
  struct Peer {
    Socket socket;
    bool open = false;
    std::deque<std::vector<std::byte>> out;  // frames' headers and bodies, in order
    size_t out_at = 0;                       // bytes of out.front() already sent
    unsigned char head[sizeof(FrameHeader)] = {};
    size_t head_got = 0;
    std::vector<std::byte> body;
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
  std::condition_variable changed_;
  std::optional<std::string> failure_;
  bool aborted_ = false;
  bool announced_ = false;
  bool stop_ = false;
  int wake_fd_ = -1;
  std::thread io_;
};

TcpProcessGroup::World::World(const TcpGroupConfig& config) : rank_(config.rank), size_(config.world_size) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw_runtime("process group: rank {} of {} processes is no process of the group", rank_, size_);
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
  const Socket listener = listen_on(config.port);
  port_ = local_port(listener);
  std::vector<Socket> joined(static_cast<size_t>(size_));
  std::set<int> missing;
  for (int p = 1; p < size_; ++p) missing.insert(p);

  // The same answer to every process that joined (and the one at fault), then the same BadInput here.
  const auto refuse = [&](Socket& offender, const std::string& message) {
    std::vector<unsigned char> answer(kAnswerBytes + message.size());
    std::memcpy(answer.data(), kMagic, 4);
    put_u32(answer.data() + 4, 1);
    put_u32(answer.data() + 8, static_cast<std::uint32_t>(message.size()));
    std::memcpy(answer.data() + kAnswerBytes, message.data(), message.size());
    const auto by = std::min(deadline, Clock::now() + std::chrono::seconds(2));
    write_full(offender.fd(), answer.data(), answer.size(), by);
    for (Socket& s : joined)
      if (s.valid()) write_full(s.fd(), answer.data(), answer.size(), by);
    throw_bad_input("{}", message);
  };

  while (!missing.empty()) {
    Socket client = accept_before(listener, deadline);
    if (!client.valid()) {
      if (Clock::now() < deadline) continue;  // the client gave up meanwhile
      std::string list;
      for (int p : missing) list += fmt::format("{}{}", list.empty() ? "" : ", ", p);
      throw_runtime("process 0 of {}: process{} {} did not join at port {} within {:g} s; did {} start, with "
                    "MASTER_ADDR naming this host?",
                    size_, missing.size() == 1 ? "" : "es", list, port_, config.timeout_s,
                    missing.size() == 1 ? "it" : "they");
    }
    unsigned char hello[kHelloBytes];
    // A client that connects and says nothing must not hold up the others for long.
    const auto answer_by = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    if (!read_full(client.fd(), hello, sizeof hello, answer_by) || std::memcmp(hello, kMagic, 4) != 0 ||
        get_u32(hello + 4) != kVersion)
      continue;
    const int rank = static_cast<int>(get_u32(hello + 8));
    const int world = static_cast<int>(get_u32(hello + 12));
    if (world != size_)
      refuse(client, fmt::format("{}: process {} was started for {} processes and process 0 for {}; start every process "
                                 "with the same {}",
                                 config.world_variable, rank, world, size_, config.world_variable));
    if (rank < 1 || rank >= size_)
      refuse(client, fmt::format("{}: a process says it is rank {}, outside 1..{} of the {} processes; give each "
                                 "process its own rank below {}",
                                 config.rank_variable, rank, size_ - 1, size_, size_));
    if (joined[static_cast<size_t>(rank)].valid())
      refuse(client, fmt::format("{}: two processes say they are rank {}; give each process its own rank",
                                 config.rank_variable, rank));
    cards_[static_cast<size_t>(rank)] = get_card(hello + 16);
    joined[static_cast<size_t>(rank)] = std::move(client);
    missing.erase(rank);
  }

  std::vector<unsigned char> welcome(kAnswerBytes + kCardBytes * static_cast<size_t>(size_));
  std::memcpy(welcome.data(), kMagic, 4);
  put_u32(welcome.data() + 4, 0);
  put_u32(welcome.data() + 8, static_cast<std::uint32_t>(welcome.size() - kAnswerBytes));
  for (int p = 0; p < size_; ++p) put_card(welcome.data() + kAnswerBytes + kCardBytes * static_cast<size_t>(p), cards_[static_cast<size_t>(p)]);
  // A process that went meanwhile is found at the first wait (its connection closed).
  for (int p = 1; p < size_; ++p) write_full(joined[static_cast<size_t>(p)].fd(), welcome.data(), welcome.size(), deadline);
  start(std::move(joined));
}

void TcpProcessGroup::World::join_as_other(const TcpGroupConfig& config, Clock::time_point deadline) {
  unsigned char hello[kHelloBytes];
  std::memcpy(hello, kMagic, 4);
  put_u32(hello + 4, kVersion);
  put_u32(hello + 8, static_cast<std::uint32_t>(rank_));
  put_u32(hello + 12, static_cast<std::uint32_t>(size_));
  put_card(hello + 16, cards_[static_cast<size_t>(rank_)]);
  std::string last_error = "no attempt";
  for (;;) {
    Socket s = connect_once(config.host, config.port, deadline, last_error);
    if (s.valid()) {
      unsigned char answer[kAnswerBytes];
      if (write_full(s.fd(), hello, sizeof hello, deadline) && read_full(s.fd(), answer, sizeof answer, deadline) &&
          std::memcmp(answer, kMagic, 4) == 0) {
        std::vector<unsigned char> body(get_u32(answer + 8));
        if (body.size() > (1u << 20) || !read_full(s.fd(), body.data(), body.size(), deadline)) {
          last_error = "process 0's answer ended early";
        } else if (get_u32(answer + 4) != 0) {
          throw_bad_input("{}", std::string(reinterpret_cast<const char*>(body.data()), body.size()));
        } else if (body.size() != kCardBytes * static_cast<size_t>(size_)) {
          last_error = "process 0's answer lists another number of processes";
        } else {
          for (int p = 0; p < size_; ++p)
            if (p != rank_) cards_[static_cast<size_t>(p)] = get_card(body.data() + kCardBytes * static_cast<size_t>(p));
          std::vector<Socket> sockets(static_cast<size_t>(size_));
          sockets[0] = std::move(s);
          start(std::move(sockets));
          return;
        }
      } else {
        last_error = "the connection closed before process 0 answered";
      }
    }
    if (Clock::now() >= deadline)
      throw_runtime("process {} of {} could not join process 0 at {}:{} within {:g} s ({}); is process 0 running, and are "
                    "MASTER_ADDR and MASTER_PORT the same for every process?",
                    rank_, size_, config.host, config.port, config.timeout_s, last_error);
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

void TcpProcessGroup::World::send_locked(int dst, Kind kind, std::vector<std::byte> body) {
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

void TcpProcessGroup::World::read_locked(int p) {
  Peer& peer = peers_[static_cast<size_t>(p)];
  while (peer.open) {
    const bool in_head = peer.head_got < sizeof(FrameHeader);
    void* at = in_head ? static_cast<void*>(peer.head + peer.head_got) : static_cast<void*>(peer.body.data() + peer.body_got);
    const size_t want = in_head ? sizeof(FrameHeader) - peer.head_got : peer.body.size() - peer.body_got;
    if (want > 0) {
      const ssize_t got = ::recv(peer.socket.fd(), at, want, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (got <= 0) {
        close_locked(p);
        return;
      }
      (in_head ? peer.head_got : peer.body_got) += static_cast<size_t>(got);
      if (static_cast<size_t>(got) < want) continue;
    }
    FrameHeader h;
    std::memcpy(&h, peer.head, sizeof h);
    if (in_head) {
      peer.body.resize(h.length);  // then read the body (if any) before dispatching
      peer.body_got = 0;
      if (h.length > 0) continue;
    }
    std::vector<std::byte> body = std::move(peer.body);
    peer.body = {};
    peer.head_got = 0;
    peer.body_got = 0;
    dispatch_locked(p, h, std::move(body));
  }
}

void TcpProcessGroup::World::dispatch_locked(int from, const FrameHeader& h, std::vector<std::byte> body) {
  const Kind kind = static_cast<Kind>(h.kind);
  const int src = rank_ == 0 ? from : h.src;  // process 0 knows who sent it; the others learn it from the header
  if (rank_ == 0 && h.dst != 0 && h.dst != kEveryone) {
    if (h.dst > 0 && h.dst < size_) queue_locked(h.dst, h, std::move(body));
    return;
  }
  if (rank_ == 0 && h.dst == kEveryone)
    for (int p = 1; p < size_; ++p)
      if (p != src) queue_locked(p, h, body);
  switch (kind) {
    case Kind::Tensor:
      tensors_.emplace_back(src, std::move(body));
      break;
    case Kind::Failure:
      if (!failure_) failure_ = std::string(reinterpret_cast<const char*>(body.data()), body.size());
      break;
    case Kind::Arrive:
      ++arrivals_[static_cast<size_t>(src)];
      break;
    case Kind::Release:
      ++releases_;
      break;
    case Kind::Gather:
      gathered_[static_cast<size_t>(src)].push_back(std::move(body));
      break;
    case Kind::Broadcast:
      broadcasts_.push_back(std::move(body));
      break;
    case Kind::End: {
      std::int32_t code = 1;
      if (body.size() == sizeof code) std::memcpy(&code, body.data(), sizeof code);
      end_now_locked(from, code);
    }
  }
  changed_.notify_all();
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
      fds.push_back({wake_fd_, POLLIN, 0});
      who.push_back(-1);
      for (int p = 0; p < size_; ++p) {
        const Peer& peer = peers_[static_cast<size_t>(p)];
        if (!peer.open) continue;
        fds.push_back({peer.socket.fd(), static_cast<short>(POLLIN | (peer.out.empty() ? 0 : POLLOUT)), 0});
        who.push_back(p);
      }
    }
    const int n = ::poll(fds.data(), fds.size(), -1);
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
      if (!fds[i].revents) continue;
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
    world_->send_locked(dst, Kind::Tensor, message_to_wire(key, message, world_->last_meeting_));
  }

  Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) override {
    if (dst != world_->rank())
      throw_runtime("rank {} cannot receive in process {}: a process hosts one rank", dst, world_->rank());
    Message out;
    world_->wait(deadline, [&] {
      take_arrivals_locked();
      return take_message(mailbox_, src, key, out);
    });
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
    if (w.rank() != 0) w.send_locked(0, Kind::Arrive, {});
  }
  if (w.rank() == 0) {
    w.wait(deadline, [&] {
      return std::all_of(w.arrivals_.begin() + 1, w.arrivals_.end(), [&](long a) { return a >= round; });
    });
    std::lock_guard lock(w.mutex_);
    for (int p = 1; p < w.size(); ++p) w.send_locked(p, Kind::Release, {});
  } else {
    w.wait(deadline, [&] { return w.releases_ >= round; });
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
    w.send(0, Kind::Gather, std::move(bytes));
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
    for (int p = 1; p < w.size(); ++p) w.send_locked(p, Kind::Broadcast, bytes);
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

TcpGroupConfig tcp_group_config(const LaunchEnv& env, double timeout_s) {
  if (env.master_addr.empty() || env.master_port == 0)
    throw_bad_input("{}: not set; the processes {} starts meet over TCP at MASTER_ADDR:MASTER_PORT: export "
                    "MASTER_ADDR=<the host of process 0> and MASTER_PORT=<a free port> for every process",
                    env.master_addr.empty() ? "MASTER_ADDR" : "MASTER_PORT", env.launcher);
  TcpGroupConfig c;
  c.rank = env.rank;
  c.world_size = env.world_size;
  c.host = env.master_addr;
  c.timeout_s = timeout_s;
  if (env.launcher == "torchrun") {
    c.port = env.master_port + 1;
    if (c.port > 65535)
      throw_bad_input("MASTER_PORT: {} leaves no port above it, where the processes meet (torchrun's agent keeps "
                      "MASTER_PORT); set MASTER_PORT to 65534 or less",
                      env.master_port);
  } else {
    c.port = env.master_port;
  }
  if (env.launcher == "slurm") {
    c.world_variable = "SLURM_NTASKS";
    c.rank_variable = "SLURM_PROCID";
  }
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
