// What the TCP group reads from the network, one decoder at a time: the job token, the hello and process
// 0's answer, frame headers, and the wait notices that name a stalled process.
#include <catch2/catch.hpp>

#include <cstring>

#include <fmt/format.h>

#include "../error_text.hpp"
#include "executor/job_token.hpp"
#include "executor/tcp_frame.hpp"
#include "executor/tcp_hello.hpp"
#include "executor/wait_notice.hpp"
#include "tcp_test_util.hpp"

using namespace pw;
using pw::test::frame;

namespace {

std::string hex(const Sha256& d) {
  std::string out;
  for (unsigned char c : d) out += fmt::format("{:02x}", c);
  return out;
}

}  // namespace

TEST_CASE("sha256 agrees with FIPS 180-4's examples") {
  CHECK(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // 64 bytes: the padding takes a block of its own.
  CHECK(hex(sha256(std::string(64, 'a'))) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST_CASE("the job token: one per job id, address and port, compared whole") {
  LaunchEnv a;
  a.launcher = "torchrun";
  a.job_id_variable = "TORCHELASTIC_RUN_ID";
  a.job_id = "run-1";
  const JobToken t = job_token(a, "node-1", 29501);
  CHECK(t.source == "TORCHELASTIC_RUN_ID");
  CHECK(job_token(a, "node-1", 29501).digest == t.digest);
  CHECK(job_token(a, "node-1", 29502).digest != t.digest);
  CHECK(job_token(a, "node-2", 29501).digest != t.digest);
  LaunchEnv b = a;
  b.job_id = "run-2";
  CHECK(job_token(b, "node-1", 29501).digest != t.digest);
  // Neither a token nor a launcher's job id: the address alone would let anyone who reaches it take a rank.
  LaunchEnv none;
  none.launcher = "torchrun";
  CHECK(bad_input([&] { job_token(none, "node-1", 29501); }) ==
        "PIPEWRIGHT_JOB_TOKEN: not set, and the launcher gives no job id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID): with "
        "MASTER_ADDR and MASTER_PORT alone anyone who can reach node-1:29501 could join as a rank; export one token "
        "to every process of the job, e.g. export PIPEWRIGHT_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d "
        "' \\n')");

  Sha256 other = t.digest;
  CHECK(same_digest(t.digest, other.data()));
  other[31] ^= 1;
  CHECK_FALSE(same_digest(t.digest, other.data()));
  other = t.digest;
  other[0] ^= 0x80;
  CHECK_FALSE(same_digest(t.digest, other.data()));
}

TEST_CASE("a hello: magic, version and token are checked before its rank or world size are read") {
  Sha256 token{};
  token[3] = 7;
  const Hello sent{token, 3, 4, Card{1234, "node-7"}};
  const auto wire = hello_to_wire(sent);
  CHECK(wire.size() == 116);
  std::string why;
  const std::optional<Hello> back = hello_from_wire(wire.data(), token, why);
  REQUIRE(back);
  CHECK(back->rank == 3);
  CHECK(back->world == 4);
  CHECK(back->card.pid == 1234);
  CHECK(back->card.host == "node-7");

  Sha256 wrong = token;
  wrong[31] = 1;
  CHECK_FALSE(hello_from_wire(wire.data(), wrong, why));
  CHECK(why == "another job token, claiming rank 3 of 4");
  auto old = wire;
  old[7] = 1;  // version 1: the hello without a token
  CHECK_FALSE(hello_from_wire(old.data(), token, why));
  CHECK(why == "not a pipewright hello");
  auto junk = wire;
  junk[0] = 'X';
  CHECK_FALSE(hello_from_wire(junk.data(), token, why));
  CHECK(why == "not a pipewright hello");
  // A host name of 64 bytes or more is cut, never read past its field.
  const auto long_host = hello_to_wire(Hello{token, 1, 2, Card{1, std::string(100, 'h')}});
  CHECK(hello_from_wire(long_host.data(), token, why)->card.host == std::string(63, 'h'));
}

TEST_CASE("process 0's answer: its length is checked against what such an answer holds before anything is allocated") {
  const std::vector<unsigned char> welcome = welcome_to_wire({Card{1, "a"}, Card{2, "b"}});
  std::string why;
  const auto head = answer_head_from_wire(welcome.data(), 2, why);
  REQUIRE(head);
  CHECK(head->welcome);
  CHECK(head->length == 136);
  const std::vector<unsigned char> body(welcome.begin() + 12, welcome.end());
  CHECK(cards_from_wire(body, 2)[1].host == "b");
  // The same welcome read by a process started for 3: refused, not read as 3 cards.
  CHECK_FALSE(answer_head_from_wire(welcome.data(), 3, why));
  CHECK(why == "process 0's welcome lists 136 bytes of processes, not the 204 of 3 processes");

  std::vector<unsigned char> huge = refusal_to_wire("no");
  huge[8] = huge[9] = huge[10] = huge[11] = 0xff;  // 4 GiB announced
  CHECK_FALSE(answer_head_from_wire(huge.data(), 2, why));
  CHECK(why == "process 0's refusal announces 4294967295 bytes, more than the 4096 one holds");
  huge[4] = 9;
  CHECK_FALSE(answer_head_from_wire(huge.data(), 2, why));
  CHECK(why == "process 0's answer is not a pipewright answer");
  // A refusal's text is cut to what the other end takes.
  CHECK(refusal_to_wire(std::string(10000, 'x')).size() == 12 + 4096);
}

TEST_CASE("a frame header: kind, sender, receiver and length are checked before its body is read") {
  // At process 0 of 4, over the connection to process 2.
  CHECK(frame_fault(frame(FrameKind::Tensor, 2, 3, 100), 2, 0, 4).empty());
  CHECK(frame_fault(frame(FrameKind::Failure, 2, kEveryone, 10), 2, 0, 4).empty());
  CHECK(frame_fault(frame(FrameKind::Tensor, 1, 3, 100), 2, 0, 4) == "a frame that says it comes from rank 1");
  CHECK(frame_fault(frame(FrameKind::Tensor, 2, 4, 100), 2, 0, 4) == "a frame for rank 4 of a group of 4");
  CHECK(frame_fault(frame(FrameKind::Tensor, 2, -7, 100), 2, 0, 4) == "a frame for rank -7 of a group of 4");
  CHECK(frame_fault(frame(FrameKind::Tensor, 2, 2, 100), 2, 0, 4) == "a frame for rank 2 of a group of 4");
  CHECK(frame_fault(frame(FrameKind::Tensor, 2, 3, std::uint64_t{1} << 40), 2, 0, 4) ==
        "a frame of kind 1 with 1099511627776 bytes, more than the 2147483647 it may hold");
  CHECK(frame_fault(frame(FrameKind::Tensor, 2, 3, 2'000'000'000), 2, 0, 4).empty());  // within MPI's limit too
  CHECK(frame_fault(frame(FrameKind::Arrive, 2, 0, 1), 2, 0, 4) == "a frame of kind 3 with 1 bytes, more than the 0 it may hold");
  CHECK(frame_fault(frame(FrameKind::Failure, 2, kEveryone, 65537), 2, 0, 4) ==
        "a frame of kind 2 with 65537 bytes, more than the 65536 it may hold");
  CHECK(frame_fault(frame(FrameKind::End, 2, kEveryone, 5), 2, 0, 4) == "a frame of kind 7 with 5 bytes, more than the 4 it may hold");
  FrameHeader unknown = frame(FrameKind::Tensor, 2, 3, 0);
  unknown.kind = 99;
  CHECK(frame_fault(unknown, 2, 0, 4) == "a frame of unknown kind 99");
  unknown.kind = 0;
  CHECK(frame_fault(unknown, 2, 0, 4) == "a frame of unknown kind 0");
  // At process 1 of 4 (over its one connection, to process 0): relayed frames from any other process.
  CHECK(frame_fault(frame(FrameKind::Gather, 3, 1, 8), 0, 1, 4).empty());
  CHECK(frame_fault(frame(FrameKind::Gather, 7, 1, 8), 0, 1, 4) == "a frame that says it comes from rank 7 of a group of 4");
  CHECK(frame_fault(frame(FrameKind::Gather, -1, 1, 8), 0, 1, 4) == "a frame that says it comes from rank -1 of a group of 4");
  CHECK(frame_fault(frame(FrameKind::Gather, 1, 1, 8), 0, 1, 4) == "a frame that says it comes from rank 1 of a group of 4");
  CHECK(frame_fault(frame(FrameKind::Gather, 3, 2, 8), 0, 1, 4) == "a frame for rank 2 at rank 1");
  CHECK(frame_fault(frame(FrameKind::Wait, 3, kEveryone, kWaitNoticeBytes), 0, 1, 4).empty());
  CHECK(frame_fault(frame(FrameKind::Wait, 3, kEveryone, 3), 0, 1, 4).empty());  // the notice's own check refuses it
}

TEST_CASE("a wait notice: its length, waiter and awaited process are checked") {
  const std::vector<std::byte> wire = wait_notice_to_wire(WaitNotice{2, 0, "0SEND_F3"});
  CHECK(wire.size() == kWaitNoticeBytes);
  const auto back = wait_notice_from_wire(wire, 4);
  REQUIRE(back);
  CHECK(back->waiter == 2);
  CHECK(back->on == 0);
  CHECK(back->what == "0SEND_F3");
  CHECK_FALSE(wait_notice_from_wire(wire, 2));  // waiter 2 in a group of 2
  CHECK_FALSE(wait_notice_from_wire(std::span(wire).first(10), 4));
  CHECK_FALSE(wait_notice_from_wire(wait_notice_to_wire(WaitNotice{1, 4, ""}), 4));
  CHECK_FALSE(wait_notice_from_wire(wait_notice_to_wire(WaitNotice{1, -3, ""}), 4));
  CHECK(wait_notice_from_wire(wait_notice_to_wire(WaitNotice{1, kAtMeeting, ""}), 4));
  CHECK(wait_notice_from_wire(wait_notice_to_wire(WaitNotice{1, kNotWaiting, ""}), 4));
  CHECK(wait_notice_from_wire(wait_notice_to_wire(WaitNotice{1, 0, std::string(50, 'x')}), 4)->what == std::string(31, 'x'));
}

TEST_CASE("the wait board follows who waits on whom to the process that waits on no one") {
  const Clock::time_point now = Clock::now();
  WaitBoard board(4);
  // Rank 0 stalled; rank 1 waits on it, rank 2 on rank 1, rank 3 on rank 2.
  board.note({1, 0, "0SEND_F3"}, now);
  board.note({2, 1, "1SEND_F3"}, now + std::chrono::seconds(1));
  board.note({3, 2, "2SEND_F3"}, now);
  WaitBoard::Verdict v = board.blame(1, 0);
  CHECK(v.reports);  // rank 1 waits on rank 0 directly: its own timeout names it
  CHECK(v.stalled == std::vector<int>{0});
  v = board.blame(3, 2);
  CHECK_FALSE(v.reports);
  CHECK(v.stalled == std::vector<int>{0});
  CHECK(v.last_heard == now + std::chrono::seconds(1));
  // Rank 1 stopped waiting (its message came): rank 2 waits on rank 1, which is to blame now.
  board.note({1, kNotWaiting, ""}, now);
  CHECK(board.blame(2, 1).reports);
  CHECK(board.blame(3, 2).stalled == std::vector<int>{1});

  // At a meeting: ranks 1 and 3 are there, rank 2 waits on rank 0, which waits on no one.
  WaitBoard meeting(4);
  meeting.note({1, kAtMeeting, "the meeting"}, now);
  meeting.note({3, kAtMeeting, "the meeting"}, now);
  meeting.note({2, 0, "0SEND_B1"}, now);
  v = meeting.blame(1, kAtMeeting);
  CHECK(v.reports);  // the lowest-numbered process at the meeting
  CHECK(v.stalled == std::vector<int>{0});
  CHECK_FALSE(meeting.blame(3, kAtMeeting).reports);
  CHECK(meeting.blame(3, kAtMeeting).stalled == std::vector<int>{0});

  // Ranks 1 and 3 both wait on rank 2 directly: rank 1 alone reports.
  WaitBoard two(4);
  two.note({1, 2, "2SEND_B0"}, now);
  two.note({3, 2, "2SEND_F1"}, now);
  CHECK(two.blame(1, 2).reports);
  CHECK_FALSE(two.blame(3, 2).reports);
  CHECK(two.blame(3, 2).stalled == std::vector<int>{2});

  // Two that wait on each other: no one stalled, a plain timeout.
  WaitBoard cycle(3);
  cycle.note({1, 2, ""}, now);
  cycle.note({2, 1, ""}, now);
  CHECK(cycle.blame(0, 1).stalled.empty());
}

TEST_CASE("a wait names the stalled process: a timeout where it waits on it, after a grace where it does not") {
  WaitBoard board(3);
  const Clock::time_point now = Clock::now();
  board.note({1, 0, "0SEND_F0"}, now);
  // Rank 2 waits on rank 1, which waits on rank 0: rank 1 reports; rank 2 waits up to a timeout past rank
  // 1's notice and 2 s more, then names rank 0 itself.
  // Begun at `now`: a watch that read the clock itself would give a timeout a little under 100 ms on a busy
  // machine ("within 0.0999 s").
  WaitWatch watch(2, 1, "1SEND_F0", now + std::chrono::milliseconds(100), now);
  CHECK(watch.due(now + std::chrono::milliseconds(5)) == std::nullopt);  // notices after 100 ms / 8
  const auto notice = watch.due(now + std::chrono::milliseconds(13));
  REQUIRE(notice);
  CHECK(notice->on == 1);
  CHECK(watch.ended()->on == kNotWaiting);
  watch.at_deadline(board);
  CHECK(watch.deadline() >= now + std::chrono::milliseconds(2100));
  try {
    watch.at_deadline(board);
    FAIL("no stall named");
  } catch (const PeerStalled& e) {
    CHECK(std::string(e.what()) ==
          "no message from rank 1 (1SEND_F0) within 0.1 s; rank 1 itself waits on rank 0, which waits on no rank: stalled");
  }
  // Rank 1 itself: a plain timeout, which the runtime words as "no message from rank 0".
  WaitWatch direct(1, 0, "0SEND_F0", now, now);
  CHECK_THROWS_AS(direct.at_deadline(board), RecvTimeout);
  // A wait nobody is told of simply times out.
  WaitWatch quiet(1, kNotWaiting, "", now, now);
  CHECK(quiet.due(now + std::chrono::hours(1)) == std::nullopt);
  CHECK_THROWS_AS(quiet.at_deadline(board), RecvTimeout);
}

TEST_CASE("a stall names the timeout given, though the wait began a moment after its deadline was set") {
  WaitBoard meeting(2);
  const Clock::time_point now = Clock::now();
  meeting.note({0, kAtMeeting, "the meeting"}, now);
  const auto stall_text = [&](std::chrono::microseconds span) {
    WaitWatch watch(0, kAtMeeting, "the meeting", now + span, now);
    try {
      watch.at_deadline(meeting);
    } catch (const PeerStalled& e) {
      return std::string(e.what());
    }
    return std::string("no stall named");
  };
  using std::chrono::microseconds;
  // 0.2 s set, 0.7 ms and 4 ms lost before the wait began (the second under TSan on a loaded machine).
  CHECK(stall_text(microseconds(199'300)) == "rank 1 did not arrive within 0.2 s and waits on no rank: stalled");
  CHECK(stall_text(microseconds(196'000)) == "rank 1 did not arrive within 0.2 s and waits on no rank: stalled");
  CHECK(stall_text(microseconds(450'000)) == "rank 1 did not arrive within 0.45 s and waits on no rank: stalled");
  CHECK(stall_text(microseconds(29'990'000)) == "rank 1 did not arrive within 30 s and waits on no rank: stalled");
  CHECK(stall_text(microseconds(120'000'000)) == "rank 1 did not arrive within 120 s and waits on no rank: stalled");
  // A wait begun well after its deadline was set says how long it waited.
  CHECK(stall_text(microseconds(150'000)) == "rank 1 did not arrive within 0.15 s and waits on no rank: stalled");
}
