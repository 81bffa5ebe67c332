// The processes' TCP group (torchrun, srun without MPI): threads stand in for processes on localhost (each
// with its own group and sockets), then `pipewright run` processes started with torchrun's variables set by
// hand compute what the threads compute, and fail together.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "executor/host_tensor.hpp"
#include "executor/job_token.hpp"
#include "executor/sleep_backend.hpp"
#include "executor/tcp_hello.hpp"
#include "executor/tcp_process_group.hpp"
#include "executor/wait_notice.hpp"
#include "tcp_test_util.hpp"
#include "tests/executor/command_job.hpp"
#include "../text_match.hpp"

using namespace pw;
using namespace pw::test;

namespace {

#ifndef PIPEWRIGHT_BINARY
#define PIPEWRIGHT_BINARY ""
#endif

// `n` processes as threads: process 0 listens on a free port and the others join it (retrying until it
// listens); body(group) runs in each. What each body threw, by process ("" when nothing; an Error's kind in
// front).
std::vector<std::string> run_processes(int n, const std::function<void(TcpProcessGroup&)>& body,
                                       const std::function<TcpGroupConfig(int rank, int port)>& config = {}) {
  const int port = free_port();
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        TcpProcessGroup g(config ? config(r, port) : config_for(r, n, port));
        body(g);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = (e.kind() == ErrorKind::BadInput ? "(bad input) " : "(runtime) ") + std::string(e.what());
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

std::vector<std::byte> text_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::string text_of(const std::vector<std::byte>& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

}  // namespace

TEST_CASE("tcp group: a barrier lets nobody through before the last arrives, gather and broadcast move bytes") {
  std::vector<Clock::time_point> left(3);
  Clock::time_point last_arrived{};
  std::vector<std::vector<std::vector<std::byte>>> gathered(3);
  std::vector<std::string> broadcast(3);
  const auto errors = run_processes(3, [&](TcpProcessGroup& g) {
    const auto r = static_cast<size_t>(g.rank());
    for (int round = 0; round < 2; ++round) {  // twice: a second barrier is not satisfied by the first's arrivals
      if (g.rank() == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        last_arrived = Clock::now();
      }
      left[r] = g.barrier(in_s(10));
    }
    // Process r sends r + 1 bytes of value r: lengths and order show who sent what.
    gathered[r] = g.gather(std::vector<std::byte>(r + 1, std::byte(r)), in_s(10));
    broadcast[r] = text_of(g.broadcast(text_bytes(g.rank() == 0 ? "from process 0" : "ignored"), in_s(10)));
  });
  CHECK(errors == std::vector<std::string>(3));
  for (size_t r = 0; r < 3; ++r) {
    CHECK(left[r] >= last_arrived);
    CHECK(broadcast[r] == "from process 0");
  }
  REQUIRE(gathered[0].size() == 3);
  for (size_t r = 0; r < 3; ++r) CHECK(gathered[0][r] == std::vector<std::byte>(r + 1, std::byte(r)));
  CHECK(gathered[1].empty());
  CHECK(gathered[2].empty());
}

TEST_CASE("tcp group: tensors cross between every pair as their wire bytes, matched by sender and key") {
  SleepBackend backend({});
  const auto value = [](int from, int to) {
    Mat m(2, 3);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = 0.25f * static_cast<float>(i) + 10.0f * static_cast<float>(from) + static_cast<float>(to);
    return m;
  };
  std::vector<std::string> checked(3);
  const auto errors = run_processes(3, [&](TcpProcessGroup& g) {
    const auto transport = g.transport_for(backend);
    const int me = g.rank();
    // Two messages to each other process, the later key first (1 -> 2 goes through process 0 unread).
    for (int to = 0; to < 3; ++to) {
      if (to == me) continue;
      transport->send(me, to, MessageKey{0, Op::SendB, me, 1}, Message{nullptr, Clock::now(), 7});
      transport->send(me, to, MessageKey{0, Op::SendF, me, 0},
                      Message{std::make_shared<HostTensor>(value(me, to)), Clock::now(), 100 * me + to});
    }
    std::string seen;
    for (int from = 0; from < 3; ++from) {
      if (from == me) continue;
      // Results are collected here and checked on the main thread: Catch2's assertions are not thread-safe.
      const Message f = transport->recv(me, from, MessageKey{0, Op::SendF, from, 0}, in_s(10));
      if (f.tensor && static_cast<const HostTensor&>(*f.tensor).value == value(from, me) && f.flow_id == 100 * from + me)
        seen += "F";
      const Message b = transport->recv(me, from, MessageKey{0, Op::SendB, from, 1}, in_s(10));
      if (!b.tensor && b.flow_id == 7) seen += "B";
    }
    checked[static_cast<size_t>(me)] = seen;
    g.barrier(in_s(10));  // nobody closes while another still receives
  });
  CHECK(errors == std::vector<std::string>(3));
  CHECK(checked == std::vector<std::string>(3, "FBFB"));
}

TEST_CASE("tcp group: a world size or rank that disagrees with process 0's is bad input everywhere, one text") {
  // Process 1 was told 3 processes, process 0 2.
  const auto errors = run_processes(2, [](TcpProcessGroup&) {}, [](int rank, int port) {
    return config_for(rank, rank == 0 ? 2 : 3, port);
  });
  const std::string text = "(bad input) WORLD_SIZE: process 1 was started for 3 processes and process 0 for 2; start every process "
                           "with the same WORLD_SIZE";
  CHECK(errors == std::vector<std::string>{text, text});

  // Processes 1 and 2 both say rank 1 (world 3): whichever joins second is refused, and so is the first.
  const auto twice = run_processes(3, [](TcpProcessGroup&) {}, [](int rank, int port) {
    TcpGroupConfig c = config_for(rank == 2 ? 1 : rank, 3, port);
    c.rank_variable = "SLURM_PROCID";
    return c;
  });
  const std::string dup = "(bad input) SLURM_PROCID: two processes say they are rank 1; give each process its own rank";
  CHECK(twice == std::vector<std::string>{dup, dup, dup});

}

TEST_CASE("tcp group: a process whose connections close is PeerLost at process 0 within the wait, named") {
  // Three processes: process 1 leaves at once without a word; process 0 finds it gone at its barrier and
  // announces it, as the runtime does, and process 2 hears of it as PeerFailed.
  std::vector<std::string> caught(3);
  double lost_after = 99;
  const auto errors = run_processes(3, [&](TcpProcessGroup& g) {
    if (g.rank() == 1) return;  // the group's destructor closes the connection
    const Clock::time_point start = Clock::now();
    try {
      g.barrier(in_s(20));
    } catch (const PeerLost& e) {
      lost_after = since(start);
      caught[0] = fmt::format("lost {} ({})", e.rank, e.process);
      g.announce_failure("rank 1 failed: its process ended");
    } catch (const PeerFailed& e) {
      caught[static_cast<size_t>(g.rank())] = std::string("failed: ") + e.what();
    }
  });
  CHECK(errors == std::vector<std::string>(3));
  CHECK(caught[0] == fmt::format("lost 1 (pid {} on {})", getpid(), host_name()));
  CHECK(lost_after < 5);  // at once, not at the 20 s deadline
  CHECK(caught[2] == "failed: rank 1 failed: its process ended");

  // Two processes: process 0 leaves; process 1 sees its only connection close.
  std::string seen;
  run_processes(2, [&](TcpProcessGroup& g) {
    if (g.rank() == 0) return;
    try {
      g.broadcast({}, in_s(20));
    } catch (const PeerLost& e) {
      seen = fmt::format("lost {}", e.rank);
    }
  });
  CHECK(seen == "lost 0");
}

TEST_CASE("tcp group: an announced failure ends every other process's wait with its text, later waits abort") {
  std::vector<std::string> caught(3);
  const auto errors = run_processes(3, [&](TcpProcessGroup& g) {
    const auto r = static_cast<size_t>(g.rank());
    if (g.rank() == 2) {
      g.announce_failure("rank 2 failed at 0F1: boom");
      g.barrier(in_s(0.5));  // stays until the others heard (its own barrier times out or is lost)
      return;
    }
    const SleepBackend backend({});
    const auto transport = g.transport_for(backend);
    try {
      transport->recv(g.rank(), 2, MessageKey{0, Op::SendF, 2, 0}, in_s(20));
    } catch (const PeerFailed& e) {
      caught[r] = e.what();
    }
    try {
      g.barrier(in_s(20));
    } catch (const RunAborted&) {
      caught[r] += "; then aborted";
    }
  });
  (void)errors;  // process 2's own barrier ends as it may
  CHECK(caught[0] == "rank 2 failed at 0F1: boom; then aborted");
  CHECK(caught[1] == "rank 2 failed at 0F1: boom; then aborted");
}

TEST_CASE("tcp group: waits end at their deadline, a process 0 that never listens is named with its address") {
  // Process 1 never comes to the meeting and waits on nothing: process 0 names it at the deadline.
  std::string timed_out;
  run_processes(2, [&](TcpProcessGroup& g) {
    if (g.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      return;
    }
    const Clock::time_point start = Clock::now();
    try {
      g.barrier(in_s(0.5));
    } catch (const PeerStalled& e) {
      timed_out = std::string(e.what()) + (since(start) < 0.9 ? ", in time" : ", late");
    }
  });
  // 0.5 s: two significant digits name it while up to 12 ms pass between setting the deadline and waiting.
  CHECK(timed_out == "rank 1 did not arrive within 0.5 s and waits on no rank: stalled, in time");

  const int port = free_port();
  try {
    TcpProcessGroup g(config_for(1, 2, port, 0.3));
    FAIL("joined nobody");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK(std::string(e.what()) ==
          fmt::format("process 1 of 2 could not join process 0 at 127.0.0.1:{} within 0.3 s (Connection refused); is "
                      "process 0 running, and are MASTER_ADDR and MASTER_PORT the same for every process?",
                      port));
  }
}

TEST_CASE("tcp group: where the launchers' processes meet") {
  LaunchEnv torchrun;
  torchrun.launcher = "torchrun";
  torchrun.job_id_variable = "TORCHELASTIC_RUN_ID";
  torchrun.job_id = "run-1";
  torchrun.rank = 1;
  torchrun.world_size = 4;
  torchrun.master_addr = "node-001";
  torchrun.master_port = 29500;
  TcpGroupConfig c = tcp_group_config(torchrun, 30);
  CHECK(c.host == "node-001");
  CHECK(c.port == 29501);  // torchrun's agent keeps MASTER_PORT
  CHECK(c.rank == 1);
  CHECK(c.world_size == 4);
  CHECK(c.timeout_s == 30);
  CHECK(c.world_variable == "WORLD_SIZE");
  CHECK(c.rank_variable == "RANK");

  LaunchEnv srun = torchrun;
  srun.launcher = "slurm";
  c = tcp_group_config(srun, 30);
  CHECK(c.port == 29500);
  CHECK(c.world_variable == "SLURM_NTASKS");
  CHECK(c.rank_variable == "SLURM_PROCID");

  srun.master_addr.clear();
  try {
    tcp_group_config(srun, 30);
    FAIL("no MASTER_ADDR");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) == "MASTER_ADDR: not set; the processes slurm starts meet over TCP at "
                                   "MASTER_ADDR:MASTER_PORT: export MASTER_ADDR=<the host of process 0> and "
                                   "MASTER_PORT=<a free port> for every process");
  }
  torchrun.master_port = 65535;
  try {
    tcp_group_config(torchrun, 30);
    FAIL("no port above 65535");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) == "MASTER_PORT: 65535 leaves no port above it, where the processes meet (torchrun's "
                                   "agent keeps MASTER_PORT); set MASTER_PORT to 65534 or less");
  }
}

namespace {

using nlohmann::json;

using pw::test::command_line;
using pw::test::sh_quoted;
using pw::test::slurp;

constexpr const char* kTestToken = "0123456789abcdef0123456789abcdef";

struct Proc {
  int code = -1;
  std::string out, err;
};

struct Torchrun {
  std::vector<Proc> procs;
  double seconds = 0;
};

// The tiny Llama over 2 stages, real compute on the cpu backend, no profiling first.
// `n` processes of `args` at once with the variables torchrun sets (MASTER_PORT: one below a free port, where
// process 0 listens, unless `port` is given), each stopped hard at 120 s, every process but 0 started
// `later_s` seconds after it; names unique to this test process and `name`.
// The processes of a job started by hand with torchrun's variables and a job token of their own ("": none).
// `started`: only ranks 0 .. started - 1 (0: all n), the test playing the others.
Torchrun torchrun_by_hand(int n, const std::vector<std::string>& args, const std::string& name, int port = 0,
                          double later_s = 0, const std::string& token = kTestToken, int started = 0) {
  const std::string base = std::string(PIPEWRIGHT_TEST_TMP) + "/tcp-" + name + "-" + std::to_string(getpid());
  if (port == 0) port = free_port() - 1;
  std::string script;
  const int count = started > 0 ? started : n;
  for (int r = 0; r < count; ++r) {
    const std::string p = base + "." + std::to_string(r);
    script.append("(");
    if (r > 0 && later_s > 0) script.append("sleep ").append(fmt::format("{:g}", later_s)).append("; ");
    script.append("env WORLD_SIZE=").append(std::to_string(n)).append(" RANK=").append(std::to_string(r));
    script.append(" LOCAL_RANK=").append(std::to_string(r)).append(" LOCAL_WORLD_SIZE=").append(std::to_string(n));
    script.append(" MASTER_ADDR=127.0.0.1 MASTER_PORT=").append(std::to_string(port));
    if (!token.empty()) script.append(" PIPEWRIGHT_JOB_TOKEN=").append(token);
    script.append(" timeout -k 5 120 ").append(command_line(args));
    script.append(" >").append(sh_quoted(p + ".out")).append(" 2>").append(sh_quoted(p + ".err"));
    script.append("; echo $? >").append(sh_quoted(p + ".code")).append(") & ");
  }
  script.append("wait");
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(("sh -c " + sh_quoted(script)).c_str());
  Torchrun t;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(WIFEXITED(status));
  for (int r = 0; r < count; ++r) {
    const std::string p = base + "." + std::to_string(r);
    Proc proc;
    proc.code = std::atoi(slurp(p + ".code").c_str());
    proc.out = slurp(p + ".out");
    proc.err = slurp(p + ".err");
    t.procs.push_back(proc);
    for (const char* ext : {".out", ".err", ".code"}) std::remove((p + ext).c_str());
  }
  return t;
}

Proc one_process(const std::vector<std::string>& args, const std::string& name) {
  const pw::test::Job j =
      pw::test::run_job(args, std::string(PIPEWRIGHT_TEST_TMP) + "/tcp-" + name + "-" + std::to_string(getpid()));
  return Proc{j.code, j.out, j.err};
}

#define SKIP_WITHOUT_BINARY()                                 \
  do {                                                        \
    if (access(PIPEWRIGHT_BINARY, X_OK) != 0) {               \
      WARN("skipped: no pipewright binary");                  \
      return;                                                 \
    }                                                         \
  } while (false)

}  // namespace

TEST_CASE("torchrun's variables, 2 processes over TCP: the threads run's losses, process 0 alone reports") {
  SKIP_WITHOUT_BINARY();
  const Proc threads = one_process(tiny_run("11", {"--backend", "cpu", "--json"}), "threads");
  INFO(threads.err);
  REQUIRE(threads.code == 0);
  const Torchrun t = torchrun_by_hand(2, tiny_run("11", {"--backend", "cpu", "--json", "--timeout", "30"}), "json");
  INFO(t.procs[0].err << t.procs[1].err);
  REQUIRE(t.procs[0].code == 0);
  REQUIRE(t.procs[1].code == 0);
  CHECK(t.procs[1].out.empty());  // one report
  CHECK(t.procs[1].err.empty());
  const json a = json::parse(threads.out);
  const json b = json::parse(t.procs[0].out);
  REQUIRE(a["losses"].size() == 2);
  CHECK(b["losses"] == a["losses"]);  // bit for bit: same seed, same floats, same order
  REQUIRE(b["ranks"].size() == 2);
  for (size_t r = 0; r < 2; ++r) {
    CHECK(b["ranks"][r]["busy_s"].get<double>() > 0);  // rank 1's records reached process 0
    CHECK(b["ranks"][r]["activation_peak_bytes"] == a["ranks"][r]["activation_peak_bytes"]);
  }

  const Torchrun table = torchrun_by_hand(2, tiny_run("11", {"--backend", "cpu", "--timeout", "30"}), "table");
  INFO(table.procs[0].err << table.procs[1].err);
  REQUIRE(table.procs[0].code == 0);
  CHECK(count(table.procs[0].out, "ranks as processes under torchrun") == 1);
  CHECK(table.procs[1].out.empty());
}

TEST_CASE("torchrun's variables: a rank that throws ends both processes at once, its error said once") {
  SKIP_WITHOUT_BINARY();
  const Torchrun t = torchrun_by_hand(2, tiny_run("11", {"--backend", "cpu", "--timeout", "20", "--inject-failure", "1:1F2"}), "throws");
  INFO(t.procs[0].err << t.procs[1].err);
  CHECK(t.procs[1].code == 1);
  CHECK(t.procs[0].code == 1);  // ended by process 1's word, as MPI_Abort would
  CHECK(t.procs[1].err == "error: rank 1 failed at 1F2: injected failure (--inject-failure)\n");
  CHECK(t.procs[0].err.empty());
  CHECK(t.procs[0].out.empty());
  CHECK(t.seconds < 8);  // not the quiet process's 10 s wait, nor the 20 s timeout
}

TEST_CASE("torchrun's variables: a process that dies is found by process 0, which names it") {
  SKIP_WITHOUT_BINARY();
  const Torchrun t = torchrun_by_hand(2, tiny_run("11", {"--backend", "cpu", "--timeout", "20", "--inject-failure", "1:1F2:exit"}), "dies");
  INFO(t.procs[0].err << t.procs[1].err);
  CHECK(t.procs[1].code == 9);
  CHECK(t.procs[0].code == 1);
  CHECK(t.procs[0].err.find("error: rank 1 failed: its process (pid ") == 0);
  CHECK(t.procs[0].err.find(") ended while rank 0 waited at 0RECV_B") != std::string::npos);
  CHECK(count(t.procs[0].err, "error: ") == 1);
  CHECK(t.seconds < 8);
}

TEST_CASE("a token holder that announces a failure and never ends the job: process 0 reports it, exit 1") {
  SKIP_WITHOUT_BINARY();
  const int port = free_port() - 1;  // process 0 listens at MASTER_PORT + 1
  LaunchEnv env;
  env.launcher = "torchrun";
  env.job_id_variable = "PIPEWRIGHT_JOB_TOKEN";
  env.job_id = kTestToken;
  const Sha256 token = job_token(env, "127.0.0.1", port + 1).digest;
  // Rank 1 is played here: it joins as the job's own would, then says it failed and keeps its connection.
  std::thread rogue([&] {
    Socket s = connect_when_listening(port + 1);
    const auto hello = hello_to_wire(Hello{token, 1, 2, Card{4242, "rogue"}});
    send_all(s, hello.data(), hello.size());
    std::vector<unsigned char> welcome(kAnswerHeadBytes + 2 * kCardBytes);
    read_full(s.fd(), welcome.data(), welcome.size(), in_s(10));
    const std::string text = "rank 1 failed at 1F0: made up";
    const FrameHeader h = frame(FrameKind::Failure, 1, kEveryone, text.size());
    send_all(s, &h, sizeof h);
    send_all(s, text.data(), text.size());
    std::this_thread::sleep_for(std::chrono::seconds(14));
  });
  const Torchrun t =
      torchrun_by_hand(2, tiny_run("11", {"--backend", "cpu", "--timeout", "30"}), "failure-frame", port, 0, kTestToken, 1);
  rogue.join();
  INFO(t.procs[0].err);
  CHECK(t.procs[0].code == 1);
  CHECK(t.procs[0].err == "error: rank 1 failed at 1F0: made up (announced by process 1 (pid 4242 on rogue), which "
                          "did not end the job within 10 s)\n");
}

TEST_CASE("torchrun's variables without a job token or a run id: every process refuses at once, naming the token") {
  SKIP_WITHOUT_BINARY();
  // The address alone is public: a token computed from it let an impostor take rank 1 (issue 37).
  const Torchrun t = torchrun_by_hand(2, tiny_run("11", {"--backend", "cpu", "--timeout", "30"}), "no-token", 0, 0, "");
  // Process 0 says it; the others meet the same bad input and leave quietly (a launcher ends them sooner).
  INFO(t.procs[0].err << t.procs[1].err);
  CHECK(t.procs[0].code == 2);
  CHECK(t.procs[0].err.starts_with("error: PIPEWRIGHT_JOB_TOKEN: not set, and the launcher gives no job id"));
  CHECK(t.procs[1].code == 2);
  CHECK(t.procs[1].err.empty());
  CHECK(t.seconds < 25);  // before the join's 30 s timeout: nobody listened
}

TEST_CASE("torchrun's variables: strangers on the port while the processes join are dropped, the job finishes") {
  SKIP_WITHOUT_BINARY();
  const int port = free_port() - 1;  // process 0 listens at MASTER_PORT + 1
  // While process 0 waits for process 1 (started a second later): a hello with another job's token, a
  // connection that says nothing, and a frame header announcing 2^40 bytes where a hello belongs.
  std::thread strangers([port] {
    Socket impostor = connect_when_listening(port + 1);
    Sha256 other{};
    other[0] = 1;
    const auto hello = hello_to_wire(Hello{other, 1, 2, Card{1, "impostor"}});
    send_all(impostor, hello.data(), hello.size());
    Socket silent = connect_when_listening(port + 1);
    Socket junk = connect_when_listening(port + 1);
    std::vector<unsigned char> header(kHelloBytes, 0xff);
    send_all(junk, header.data(), header.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  });
  const Torchrun t = torchrun_by_hand(2, tiny_run("11", {"--backend", "cpu", "--json", "--timeout", "30"}), "strangers", port, 1);
  strangers.join();
  INFO(t.procs[0].err << t.procs[1].err);
  CHECK(t.procs[0].code == 0);
  CHECK(t.procs[1].code == 0);
  CHECK(json::parse(t.procs[0].out)["losses"].size() == 2);
  CHECK(count(t.procs[0].err, "warning: process 0 dropped a connection from 127.0.0.1:") == 3);
  CHECK(count(t.procs[0].err, "another job token, claiming rank 1 of 2 (this job's comes from PIPEWRIGHT_JOB_TOKEN)\n") ==
        1);
  CHECK(count(t.procs[0].err, "not a pipewright hello\n") == 1);
  CHECK(t.procs[1].err.empty());
}

TEST_CASE("torchrun's variables, 4 processes: a stalled rank is named, not the ranks waiting behind it") {
  SKIP_WITHOUT_BINARY();
  // Rank 0 hangs before its last forward; rank 1 waits on it, rank 2 on rank 1, rank 3 on rank 2. Only rank
  // 1 reports (it waits on rank 0 directly); the others hear of it.
  std::vector<std::string> args = tiny_run("11", {"--backend", "cpu", "--timeout", "2", "--inject-failure", "0:0F3:stall"});
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--pp") args[i + 1].back() = '4';  // in place: GCC 12 misreads assigning "4" (-Wrestrict)
  const Torchrun t = torchrun_by_hand(4, args, "stall4");
  INFO(t.procs[0].err << t.procs[1].err << t.procs[2].err << t.procs[3].err);
  for (const Proc& p : t.procs) CHECK(p.code == 1);
  CHECK(t.procs[1].err == "error: rank 1 failed at 1RECV_F3: no message from rank 0 (0SEND_F3) within 2 s\n");
  CHECK(t.procs[0].err.empty());
  CHECK(t.procs[2].err.empty());
  CHECK(t.procs[3].err.empty());
  CHECK(t.seconds < 8);
  WARN("rank 0 stalls, 4 processes over TCP, --timeout 2: ended in " << t.seconds << " s");
}

TEST_CASE("torchrun's variables, 4 processes over TCP: tiny-moe dp 2 x ep 2 x pp 2, the threads run's losses") {
  SKIP_WITHOUT_BINARY();
  // The experts' all-to-alls and the gradient averaging cross between processes as wire bytes.
  std::vector<std::string> args = {PIPEWRIGHT_BINARY, "run", "--model",
                                   std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-moe.json", "--cluster", "ideal",
                                   "--pp", "2", "--dp", "2", "--ep", "2", "--microbatches", "4", "--iterations", "2",
                                   "--warmup", "0", "--no-profile", "--json", "--timeout", "60"};
  const Proc threads = one_process(args, "moe-threads");
  INFO(threads.err);
  REQUIRE(threads.code == 0);
  const Torchrun t = torchrun_by_hand(4, args, "moe");
  for (const Proc& p : t.procs) {
    INFO(p.err);
    REQUIRE(p.code == 0);
  }
  for (size_t k = 1; k < 4; ++k) CHECK(t.procs[k].out.empty());
  const json a = json::parse(threads.out);
  const json b = json::parse(t.procs[0].out);
  REQUIRE(a["losses"].size() == 2);
  // The mean of the two replicas' losses, added in the same order: the same doubles.
  CHECK(b["losses"] == a["losses"]);
  REQUIRE(b["ranks"].size() == 4);
  for (size_t w = 0; w < 4; ++w) {
    CHECK(b["ranks"][w]["rank"] == w % 2);
    CHECK(b["ranks"][w]["replica"] == w / 2);
    CHECK(b["ranks"][w]["busy_s"].get<double>() > 0);
  }
  // One process too few: said once, naming --dp and the launcher's count.
  const Torchrun few = torchrun_by_hand(3, args, "moe-few");
  CHECK(few.procs[0].code == 2);
  CHECK(few.procs[0].err ==
        "error: --dp: 2 replicas of a pipeline of 2 ranks take 4 processes but torchrun started 3; start "
        "torchrun --nproc_per_node 4\n");
}
