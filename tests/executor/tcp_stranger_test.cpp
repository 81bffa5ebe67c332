// Strangers and rule-breakers on the TCP group's port while a real job joins and runs (threads stand in for
// the processes, each with its own group and sockets): connections without this job's token, silent ones
// and garbage are dropped with a warning naming their address while the job goes on; a process of the job
// (it has the token) that sends a frame no pipewright sends fails the job with the sender named, and never
// crashes or exhausts the process that reads it.
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "executor/wait_notice.hpp"
#include "executor/tcp_frame.hpp"
#include "executor/tcp_hello.hpp"
#include "../cerr_capture.hpp"
#include "tcp_test_util.hpp"

using namespace pw;
using namespace pw::test;

namespace {

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return (e.kind() == ErrorKind::BadInput ? "(bad input) " : "(runtime) ") + std::string(e.what());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

Sha256 token_of(unsigned char first) {
  Sha256 t{};
  t[0] = first;
  return t;
}

// Joins process 0 at `port` as rank 1 of 2 with the job's token, as a process of the job would, and reads
// the welcome.
Socket join_as_rank_1(int port, const Sha256& token) {
  Socket s = connect_when_listening(port);
  const auto hello = hello_to_wire(Hello{token, 1, 2, Card{4242, "rogue"}});
  send_all(s, hello.data(), hello.size());
  std::vector<unsigned char> welcome(kAnswerHeadBytes + 2 * kCardBytes);
  read_full(s.fd(), welcome.data(), welcome.size(), in_s(5));
  return s;
}

}  // namespace

TEST_CASE("strangers on the port while the job joins are dropped and named, the job goes on at once") {
  const int port = free_port();
  const Sha256 job = token_of(1);
  CerrCapture log;
  std::string errors[2];
  std::vector<std::vector<std::byte>> gathered;
  double rank1_joined_after = 99;
  std::thread process0([&] {
    errors[0] = what_of([&] {
      TcpGroupConfig c = config_for(0, 2, port);
      c.token = job;
      c.handshake_s = 5;  // as long as the join once waited for each silent connection in turn
      TcpProcessGroup g(c);
      g.barrier(in_s(10));
      gathered = g.gather({std::byte{0}}, in_s(10));
    });
  });

  // Three that say nothing; one with another token trying to take rank 1's place, one with another token and
  // a world size of 99; one that sends a frame header announcing 2^40 bytes instead of a hello.
  std::vector<Socket> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(connect_when_listening(port));
  Socket impostor = connect_when_listening(port);
  const auto fake = hello_to_wire(Hello{token_of(2), 1, 2, Card{1, "impostor"}});
  send_all(impostor, fake.data(), fake.size());
  Socket wrong_world = connect_when_listening(port);
  const auto huge_world = hello_to_wire(Hello{token_of(3), 1, 99, Card{1, "x"}});
  send_all(wrong_world, huge_world.data(), huge_world.size());
  Socket junk = connect_when_listening(port);
  std::vector<unsigned char> header(kHelloBytes, 0);
  const FrameHeader h = frame(FrameKind::Tensor, 1, 0, std::uint64_t{1} << 40);
  std::memcpy(header.data(), &h, sizeof h);
  send_all(junk, header.data(), header.size());
  // The impostor is told why (a process of this job started with another token would fail at once).
  std::vector<unsigned char> answer(kAnswerHeadBytes);
  REQUIRE(read_full(impostor.fd(), answer.data(), answer.size(), in_s(5)));
  std::string why;
  const auto head = answer_head_from_wire(answer.data(), 2, why);
  REQUIRE(head);
  std::string text(head->length, ' ');
  REQUIRE(read_full(impostor.fd(), text.data(), text.size(), in_s(5)));
  CHECK(text == "job token: this process's differs from process 0's, which comes from MASTER_ADDR and MASTER_PORT; start "
                "every process of the job with the same MASTER_ADDR and MASTER_PORT");

  // The real rank 1 joins while the silent ones still hold their connections.
  std::thread process1([&] {
    errors[1] = what_of([&] {
      const Clock::time_point start = Clock::now();
      TcpGroupConfig c = config_for(1, 2, port);
      c.token = job;
      TcpProcessGroup g(c);
      rank1_joined_after = since(start);
      g.barrier(in_s(10));
      g.gather({std::byte{1}}, in_s(10));
    });
  });
  process1.join();
  process0.join();
  CHECK(errors[0].empty());
  CHECK(errors[1].empty());
  REQUIRE(gathered.size() == 2);
  CHECK(gathered[1] == std::vector<std::byte>{std::byte{1}});
  CHECK(rank1_joined_after < 4);  // not after 5 s for each silent stranger in turn

  const std::string warnings = log.text();
  const std::string at = " to port " + std::to_string(port) + ": ";
  CHECK_THAT(warnings, Catch::Contains("warning: process 0 dropped a connection from " + local_text(impostor) + at +
                                       "another job token, claiming rank 1 of 2 (this job's comes from MASTER_ADDR and "
                                       "MASTER_PORT)\n"));
  CHECK_THAT(warnings, Catch::Contains("warning: process 0 dropped a connection from " + local_text(wrong_world) + at +
                                       "another job token, claiming rank 1 of 99 (this job's comes from MASTER_ADDR and "
                                       "MASTER_PORT)\n"));
  CHECK_THAT(warnings, Catch::Contains("warning: process 0 dropped a connection from " + local_text(junk) + at +
                                       "not a pipewright hello\n"));
  for (const Socket& s : silent)
    CHECK_THAT(warnings, Catch::Contains("warning: process 0 dropped a connection from " + local_text(s) + at +
                                         "every process had joined\n"));
}

TEST_CASE("a connection that says nothing is dropped at its own deadline, named") {
  const int port = free_port();
  CerrCapture log;
  std::string errors[2];
  std::thread process0([&] {
    errors[0] = what_of([&] {
      TcpGroupConfig c = config_for(0, 2, port);
      c.handshake_s = 0.3;
      TcpProcessGroup g(c);
    });
  });
  Socket silent = connect_when_listening(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  errors[1] = what_of([&] { TcpProcessGroup g(config_for(1, 2, port)); });
  process0.join();
  CHECK(errors[0].empty());
  CHECK(errors[1].empty());
  CHECK(log.text() == "warning: process 0 dropped a connection from " + local_text(silent) + " to port " +
                          std::to_string(port) + ": no hello within 0.3 s (0 of its 116 bytes)\n");
}

TEST_CASE("a process of the job that sends a frame no pipewright sends fails the job, named") {
  const Sha256 job = token_of(1);
  struct Case {
    FrameHeader header;
    std::string fault;
  };
  const std::vector<Case> cases = {
      {frame(FrameKind::Tensor, 1, 0, std::uint64_t{1} << 40), "a frame of kind 1 with 1099511627776 bytes, more than the 2147483647 it may hold"},
      {frame(FrameKind::Gather, 5, 0, 0), "a frame that says it comes from rank 5"},
      {frame(FrameKind::Tensor, 1, 9, 16), "a frame for rank 9 of a group of 2"},
      {frame(static_cast<FrameKind>(40), 1, 0, 0), "a frame of unknown kind 40"},
  };
  for (const Case& c : cases) {
    const int port = free_port();
    std::string error;
    double failed_after = 99;
    std::thread process0([&] {
      error = what_of([&] {
        TcpGroupConfig config = config_for(0, 2, port);
        config.token = job;
        TcpProcessGroup g(config);
        const Clock::time_point start = Clock::now();
        try {
          g.barrier(in_s(10));
        } catch (...) {
          failed_after = since(start);
          throw;
        }
      });
    });
    Socket rogue = join_as_rank_1(port, job);
    send_all(rogue, &c.header, sizeof c.header);
    process0.join();
    CHECK(error == "(runtime) process group: the connection to rank 1 (pid 4242 on rogue) carried " + c.fault +
                       "; do all processes run the same pipewright build?");
    CHECK(failed_after < 5);  // at once, not at the 10 s deadline
  }
}

TEST_CASE("a token holder that says it is rank 77 fails the join at every process that joined, one text") {
  // A process that holds the job's token but breaks the rules is refused as a misstarted one is, never
  // given a rank.
  const int port = free_port();
  std::string errors[2];
  std::thread process0([&] { errors[0] = what_of([&] { TcpProcessGroup g(config_for(0, 3, port)); }); });
  std::thread process1([&] { errors[1] = what_of([&] { TcpProcessGroup g(config_for(1, 3, port)); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // process 1 has joined
  Socket rogue = connect_when_listening(port);
  const auto hello = hello_to_wire(Hello{Sha256{}, 77, 3, Card{4242, "rogue"}});
  send_all(rogue, hello.data(), hello.size());
  process0.join();
  process1.join();
  const std::string text = "(bad input) RANK: a process says it is rank 77, outside 1..2 of the 3 processes; give each "
                           "process its own rank below 3";
  CHECK(errors[0] == text);
  CHECK(errors[1] == text);
}

TEST_CASE("a process 0 that relays a frame from no process, or announces a 4 GiB welcome, is named") {
  // A stand-in process 0 on a port of its own, answering every connection for 0.8 s; the real rank 1 joins it.
  const auto serve = [](int port, const std::function<void(Socket&)>& after_hello) {
    Socket listener = listen_at("127.0.0.1", port);
    std::vector<Socket> peers;
    const Clock::time_point until = in_s(0.8);
    while (Clock::now() < until) {
      Socket peer = accept_before(listener, until);
      if (!peer.valid()) continue;
      std::vector<unsigned char> hello(kHelloBytes);
      read_full(peer.fd(), hello.data(), hello.size(), in_s(5));
      after_hello(peer);
      peers.push_back(std::move(peer));
    }
  };

  int port = free_port();
  std::string error;
  std::thread rank1([&] {
    error = what_of([&] {
      TcpProcessGroup g(config_for(1, 2, port));
      g.barrier(in_s(10));
    });
  });
  // A gather from rank 7 of 2: once written out of bounds at gathered_[7] (SIGSEGV).
  serve(port, [](Socket& peer) {
    const std::vector<unsigned char> welcome = welcome_to_wire({Card{4242, "rogue"}, Card{1, "me"}});
    send_all(peer, welcome.data(), welcome.size());
    const FrameHeader h = frame(FrameKind::Gather, 7, 1, 0);
    send_all(peer, &h, sizeof h);
  });
  rank1.join();
  CHECK(error == "(runtime) process group: the connection to rank 0 (pid 4242 on rogue) carried a frame that says it "
                 "comes from rank 7 of a group of 2; do all processes run the same pipewright build?");

  port = free_port();
  std::thread joining([&] { error = what_of([&] { TcpProcessGroup g(config_for(1, 2, port, 0.5)); }); });
  serve(port, [](Socket& peer) {
    std::vector<unsigned char> welcome = welcome_to_wire({});
    welcome[8] = welcome[9] = welcome[10] = welcome[11] = 0xff;
    send_all(peer, welcome.data(), welcome.size());
  });
  joining.join();
  CHECK(error == fmt::format("(runtime) process 1 of 2 could not join process 0 at 127.0.0.1:{} within 0.5 s (process "
                             "0's welcome lists 4294967295 bytes of processes, not the 136 of 2 processes); is process "
                             "0 running, and are MASTER_ADDR and MASTER_PORT the same for every process?",
                             port));
}

TEST_CASE("a process 0 gone silent (the relay of every message) is named by the others, not the peers it holds up") {
  const int port = free_port();
  std::string error;
  std::thread rank1([&] {
    error = what_of([&] {
      TcpProcessGroup g(config_for(1, 2, port));
      try {
        g.barrier(in_s(1));
      } catch (const PeerStalled& e) {
        throw_runtime("{}", e.what());
      }
    });
  });
  // Welcomes rank 1, then neither beats nor relays, as a process 0 stopped by SIGSTOP.
  Socket listener = listen_at("127.0.0.1", port);
  Socket peer = accept_before(listener, in_s(10));
  std::vector<unsigned char> hello(kHelloBytes);
  read_full(peer.fd(), hello.data(), hello.size(), in_s(5));
  const std::vector<unsigned char> welcome = welcome_to_wire({Card{4242, "rogue"}, Card{1, "me"}});
  send_all(peer, welcome.data(), welcome.size());
  rank1.join();
  CHECK(error == "(runtime) process 0 (pid 4242 on rogue), through which every message passes, sent nothing for 1 s: "
                 "rank 0 stalled, or its host is out of reach");
}

TEST_CASE("process 0 listens at MASTER_ADDR's address only") {
  const int port = free_port();
  Socket listener = listen_at("127.0.0.1", port);
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  CHECK(addr.sin_addr.s_addr == htonl(INADDR_LOOPBACK));  // not 0.0.0.0
  try {
    listen_at("192.0.2.1", port);  // TEST-NET-1: an address of no machine here
    FAIL("listened at an address of another machine");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK(std::string(e.what()) == fmt::format("cannot listen at MASTER_ADDR 192.0.2.1 port {}: Cannot assign requested "
                                               "address; MASTER_ADDR must name process 0's host",
                                               port));
  }
}

TEST_CASE("a process of the job that floods process 0 with gathers fails the job at the 17th, named") {
  // Before: process 0 kept every gather until its wait timed out (745 MB in 10 s from one process).
  const Sha256 job = token_of(1);
  const int port = free_port();
  std::string error;
  std::thread process0([&] {
    error = what_of([&] {
      TcpGroupConfig config = config_for(0, 2, port);
      config.token = job;
      TcpProcessGroup g(config);
      g.barrier(in_s(10));
    });
  });
  Socket rogue = join_as_rank_1(port, job);
  const std::vector<unsigned char> body(16, 7);
  for (int i = 0; i < 17; ++i) {
    const FrameHeader h = frame(FrameKind::Gather, 1, 0, body.size());
    send_all(rogue, &h, sizeof h);
    send_all(rogue, body.data(), body.size());
  }
  process0.join();
  CHECK(error == "(runtime) process group: the connection to rank 1 (pid 4242 on rogue) carried 17 gathers of 272 bytes "
                 "together before process 0 took them (at most 16 and 2147483648 bytes wait); do all processes run the "
                 "same pipewright build?");
}
