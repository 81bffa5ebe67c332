#pragma once
// Hands the 128 bytes of an NCCL unique id from rank 0 to every other rank of a job started as separate
// processes (torchrun, srun without MPI): through a file on a filesystem every node shares, or over TCP
// at an address of its own (--rendezvous tcp:HOST:PORT). NCCL's own bootstrap takes over from there. Every
// wait has a deadline; a peer that never comes is a Runtime error naming what was awaited, not a hang.
#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "executor/launch_env.hpp"
#include "executor/tcp_process_group.hpp"

namespace pw {

using UniqueIdBytes = std::array<unsigned char, 128>;  // the size of ncclUniqueId
using RendezvousClock = std::chrono::steady_clock;

// Where the id travels: "file:PATH" or "tcp:HOST:PORT".
struct RendezvousSpec {
  enum class Kind { File, Tcp };
  Kind kind = Kind::Tcp;
  std::string path;  // File
  std::string host;  // Tcp
  int port = 0;      // Tcp
};
// Parses "file:PATH" or "tcp:HOST:PORT" (BadInput naming --rendezvous and the two forms otherwise).
RendezvousSpec rendezvous_from_text(const std::string& text);
std::string to_text(const RendezvousSpec& spec);

// File: rank 0 writes "pipewright-nccl-id 1 <world>\n" and the id to PATH.tmp and renames it to PATH, so a
// reader sees the whole file or none. The others wait for PATH; a file written for another world size is
// an error (a previous job's file: give each job its own PATH).
void publish_id_file(const std::string& path, int world_size, const UniqueIdBytes& id);
UniqueIdBytes await_id_file(const std::string& path, int world_size, RendezvousClock::time_point deadline);

// Who meets at a rendezvous: this process's index and the number of processes (rank and world_size), and
// for tcp: the address, the launcher's variables and the job token (executor/tcp_process_group.hpp's
// tcp_meeting_config; timeout_s is set from the deadline).
using RendezvousParty = TcpGroupConfig;
// The party of `env`'s processes at `spec` (its address, for tcp).
RendezvousParty rendezvous_party(const LaunchEnv& env, const RendezvousSpec& spec);

// TCP: the processes meet as a TCP group of their own at the spec's address (process 0 listens there), with
// everything that group distrusts of the network: the job token in each hello, each hello with its own
// deadline, a stranger dropped with a warning while the others join, a world size or rank that disagrees
// with process 0's bad input everywhere. Process 0 broadcasts the id; every process meets once more before
// the group closes, so none leaves while another still waits for the id. Runtime error at the deadline
// naming the processes that did not come (at process 0) or the address that did not answer (the others).
UniqueIdBytes exchange_id_over_tcp(const RendezvousParty& party, const std::function<UniqueIdBytes()>& make_id,
                                   RendezvousClock::time_point deadline);

// Process 0's bytes to every process (a process group's broadcast).
using BroadcastBytes = std::function<std::vector<std::byte>(std::vector<std::byte>)>;
// Process 0's id, made there by `make_id`, to every process through `broadcast`: Runtime error beginning
// with `context` ("rendezvous", "NCCL bootstrap") when the bytes that arrive are not an id.
UniqueIdBytes broadcast_id(int process, const std::function<UniqueIdBytes()>& make_id, const BroadcastBytes& broadcast,
                           const std::string& context);

// Process 0 makes the id with `make_id` and publishes it; every process returns it.
inline UniqueIdBytes exchange_id(const RendezvousSpec& spec, const RendezvousParty& party,
                                 const std::function<UniqueIdBytes()>& make_id, RendezvousClock::time_point deadline) {
  if (spec.kind == RendezvousSpec::Kind::Tcp) return exchange_id_over_tcp(party, make_id, deadline);
  if (party.rank != 0) return await_id_file(spec.path, party.world_size, deadline);
  const UniqueIdBytes id = make_id();
  publish_id_file(spec.path, party.world_size, id);
  return id;
}

}  // namespace pw
