#pragma once
// The processes of a run joined over TCP, for launchers that start no MPI world (torchrun; srun in a build
// without MPI). A star through process 0: process 0 listens, every other process connects to it once and
// keeps that one connection; what one non-zero process sends another (a tensor, a failure notice) travels
// through process 0, which forwards it unread. One hop more than direct connections, and N - 1 sockets
// instead of N (N - 1) / 2: right for the small activations of the CPU executor (the cuda backend moves its
// tensors over NCCL and uses this group for meeting, gathering and the NCCL id only).
//
// Every message is a frame: a fixed header (kind, sender, receiver, length) and its bytes. Each process runs
// one I/O thread that reads every connection as frames arrive (so a sender never waits for its receiver),
// finishes sends the socket could not take at once, and at process 0 forwards frames meant for others.
//
// Failure: a process that announces one sends it to process 0, which passes it to the others (PeerFailed
// with its text everywhere). A connection that closes is PeerLost: at process 0 naming the process that
// closed it, at the others naming process 0 (the only peer they see; while process 0 lives it announces
// the loss of any other, so one process reports it). Every wait ends at its deadline (RecvTimeout), or
// names the process that stalled (executor/wait_notice.hpp): the processes tell each other what they wait
// for, and process 0 sends a heartbeat every 100 ms, so that a process 0 gone silent (through which every
// message passes) is named by each of the others rather than the peers whose messages it holds.
//
// Distrust of the network: process 0 listens at MASTER_ADDR's address only; a connection's hello is read
// with its own 2 s deadline, alongside every other's, and its job token (executor/job_token.hpp) checked
// before anything else in it; a connection that sends no hello, something else, or another job's token is
// dropped with a warning on stderr naming its address, and the join goes on. Every frame's kind, sender,
// receiver and length is checked before its body is read (executor/tcp_frame.hpp): a frame that fails is a
// Runtime error naming the process that sent it, at every wait of the process that got it.
#include <memory>
#include <string>

#include "executor/launch_env.hpp"
#include "executor/process_group.hpp"
#include "executor/sha256.hpp"
#include "executor/tcp_socket.hpp"

namespace pw {

struct TcpGroupConfig {
  int rank = 0;
  int world_size = 1;
  std::string host = "127.0.0.1";  // where process 0 listens (the others connect there)
  int port = 0;                    // 0 at process 0: any free port (TcpProcessGroup::port says which)
  double timeout_s = 60;           // longest wait for the others to join
  // The launcher's variables for the world size and the rank, named by a mismatch.
  std::string world_variable = "WORLD_SIZE";
  std::string rank_variable = "RANK";
  // What every process of the job shows in its hello, and where it comes from (for messages).
  Sha256 token{};
  std::string token_source = "MASTER_ADDR and MASTER_PORT";
  AddressNames names;  // what set host and port, for messages
  double handshake_s = 2;  // longest wait for one connection's hello
};

class TcpProcessGroup : public ProcessGroup {
 public:
  // Process 0: listens at config.host and waits for every other process; the others connect, retrying while
  // process 0 is not listening yet. Each shows the job token and says its rank and world size; BadInput (at
  // process 0 and at every process that joined, one text) for a world size other than process 0's, a rank
  // outside 1..world - 1 or taken twice; BadInput at a process whose token process 0 refused. Runtime
  // error at the deadline naming the processes that did not join (process 0) or the address that did not
  // answer (the others), and when process 0 cannot listen there. At most kMostProcesses processes.
  explicit TcpProcessGroup(const TcpGroupConfig& config);
  // Sends what is still queued (at most 2 s), then closes every connection without a word: the others see
  // this process gone (PeerLost) unless they met it at a last barrier first.
  ~TcpProcessGroup() override;
  TcpProcessGroup(const TcpProcessGroup&) = delete;
  TcpProcessGroup& operator=(const TcpProcessGroup&) = delete;

  int rank() const override;
  int size() const override;
  // The port process 0 listens on (the others: the one they connected to).
  int port() const;
  std::unique_ptr<Transport> transport_for(const Backend& backend) override;
  Clock::time_point barrier(Clock::time_point deadline) override;
  std::vector<std::vector<std::byte>> gather(std::vector<std::byte> bytes, Clock::time_point deadline) override;
  std::vector<std::byte> broadcast(std::vector<std::byte> bytes, Clock::time_point deadline) override;
  std::string failure_origin() const override;

  // Tells every other process that this one failed with `message` (their waits throw PeerFailed); once,
  // never waits.
  void announce_failure(const std::string& message);
  // Makes every other process end with exit status `code` at once (std::_Exit as it receives the word),
  // as MPI_Abort does under mpirun: waits at most 1 s for the word to leave, then returns.
  void end_others(int code);
  // "pid 1234 on host".
  std::string describe(int rank) const;

  class World;

 private:
  std::shared_ptr<World> world_;
};

// The group of a job torchrun (or srun in a build without MPI) started: process 0 listens on MASTER_ADDR's
// host at MASTER_PORT + 1 under torchrun (its agent keeps its own store on MASTER_PORT; the same rule as the
// NCCL id's, executor/cuda/host/nccl_bootstrap.hpp) and at MASTER_PORT under srun. BadInput naming
// MASTER_ADDR / MASTER_PORT and the fix when they are unset or leave no port. Destroying the group meets the
// others once more (so that none ends while another waits on it); a failure there is reported on stderr and
// ends the job. While the group lives, end_job_now first makes the other processes end too.
std::unique_ptr<ProcessGroup> join_tcp_processes(const LaunchEnv& env, double timeout_s);

// The TcpGroupConfig join_tcp_processes uses (exposed for tests): host, port, variable names and job token.
TcpGroupConfig tcp_group_config(const LaunchEnv& env, double timeout_s);

// `env`'s processes meeting at host:port: this process's rank, the world size, the launcher's variables
// that set them (named by a mismatch) and the job token for that address; `names` says where host:port
// came from (MASTER_ADDR and MASTER_PORT, or an option), for messages. timeout_s is left at its default.
TcpGroupConfig tcp_meeting_config(const LaunchEnv& env, const std::string& host, int port, const AddressNames& names);

// Called by end_job_now: passes `code` to the other processes of the live job group, if any (see end_others).
void end_tcp_job(int code);

}  // namespace pw
