#pragma once
// Hands the 128 bytes of an NCCL unique id from rank 0 to every other rank of a job started as separate
// processes (torchrun, srun without MPI): through a file on a filesystem every node shares, or over TCP
// at MASTER_ADDR:MASTER_PORT. NCCL's own bootstrap takes over from there. Every wait has a deadline;
// a peer that never comes is a Runtime error naming what was awaited, not a hang.
#include <array>
#include <chrono>
#include <string>

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

// TCP: rank 0 listens (port 0: any free port, see port()) and answers each other rank once; a client sends
// "PWID", its rank and the world size, and receives "PWID" and the id.
class IdServer {
 public:
  explicit IdServer(int port);
  // Listens at `host`'s address only (tcp_socket.hpp's listen_at), as exchange_id does.
  IdServer(const std::string& host, int port);
  ~IdServer();
  IdServer(const IdServer&) = delete;
  IdServer& operator=(const IdServer&) = delete;
  int port() const { return port_; }
  // Returns once ranks 1 .. world_size - 1 each fetched the id. Runtime error at the deadline naming the
  // ranks still missing, or for a client of another world size.
  void serve(const UniqueIdBytes& id, int world_size, RendezvousClock::time_point deadline);

 private:
  int fd_ = -1;
  int port_ = 0;
};
// Connects (retrying while rank 0 is not listening yet) and fetches the id.
UniqueIdBytes fetch_id(const std::string& host, int port, int rank, int world_size, RendezvousClock::time_point deadline);

// Rank 0 makes the id with `make_id` and publishes it; every rank returns it.
template <typename MakeId>
UniqueIdBytes exchange_id(const RendezvousSpec& spec, int rank, int world_size, MakeId make_id,
                          RendezvousClock::time_point deadline) {
  if (spec.kind == RendezvousSpec::Kind::File) {
    if (rank != 0) return await_id_file(spec.path, world_size, deadline);
    const UniqueIdBytes id = make_id();
    publish_id_file(spec.path, world_size, id);
    return id;
  }
  if (rank != 0) return fetch_id(spec.host, spec.port, rank, world_size, deadline);
  IdServer server(spec.host, spec.port);
  const UniqueIdBytes id = make_id();
  server.serve(id, world_size, deadline);
  return id;
}

}  // namespace pw
