#pragma once
// The TCP group's frames (executor/tcp_process_group.hpp): a fixed header (kind, sender, receiver, length)
// and the body. Both ends run the same build, so the header travels as it lies in memory; every field is
// checked (frame_fault) before the body is read or the frame is passed on, and a body is allocated as its
// bytes arrive, never from the announced length alone.
#include <cstdint>
#include <string>

namespace pw {

enum class FrameKind : std::uint32_t { Tensor = 1, Failure, Arrive, Release, Gather, Broadcast, End, Heartbeat, Wait };
constexpr std::int32_t kEveryone = -1;

struct FrameHeader {
  std::uint32_t kind = 0;
  std::int32_t src = 0;
  std::int32_t dst = 0;
  std::uint32_t reserved = 0;
  std::uint64_t length = 0;
};

// The longest body of a tensor, a gather or a broadcast: what one MPI message carries, so both transports
// take the same runs. A failure notice's text is at most kLongestNotice; the other kinds have fixed sizes.
constexpr std::uint64_t kLongestFrame = (std::uint64_t{1} << 31) - 1;
constexpr std::uint64_t kLongestNotice = 64 * 1024;

// The longest body a frame of `kind` may have (0 for an unknown kind).
std::uint64_t longest_body(std::uint32_t kind);

// Why a frame with header `h` that arrived over the connection to process `from`, at process `me` of a
// group of `size`, cannot be taken; "" when it can. Process 0 takes from each process only frames that
// process sent (src == from) to another process or everyone; the others take only what process 0 relays
// (from a process other than themselves, to them or everyone). Lengths within longest_body.
std::string frame_fault(const FrameHeader& h, int from, int me, int size);

}  // namespace pw
