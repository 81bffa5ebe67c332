#include "executor/tcp_frame.hpp"

#include <fmt/format.h>

#include "executor/wait_notice.hpp"

namespace pw {

std::uint64_t longest_body(std::uint32_t kind) {
  switch (static_cast<FrameKind>(kind)) {
    case FrameKind::Tensor:
    case FrameKind::Gather:
    case FrameKind::Broadcast:
      return kLongestFrame;
    case FrameKind::Failure:
      return kLongestNotice;
    case FrameKind::End:
      return sizeof(std::int32_t);
    case FrameKind::Wait:
      return kWaitNoticeBytes;
    case FrameKind::Arrive:
    case FrameKind::Release:
    case FrameKind::Heartbeat:
      return 0;
  }
  return 0;
}

std::string frame_fault(const FrameHeader& h, int from, int me, int size) {
  if (h.kind < static_cast<std::uint32_t>(FrameKind::Tensor) || h.kind > static_cast<std::uint32_t>(FrameKind::Wait))
    return fmt::format("a frame of unknown kind {}", h.kind);
  if (h.length > longest_body(h.kind))
    return fmt::format("a frame of kind {} with {} bytes, more than the {} it may hold", h.kind, h.length,
                       longest_body(h.kind));
  if (me == 0) {
    if (h.src != from) return fmt::format("a frame that says it comes from rank {}", h.src);
    if (h.dst != kEveryone && (h.dst < 0 || h.dst >= size || h.dst == from))
      return fmt::format("a frame for rank {} of a group of {}", h.dst, size);
  } else {
    if (h.src < 0 || h.src >= size || h.src == me)
      return fmt::format("a frame that says it comes from rank {} of a group of {}", h.src, size);
    if (h.dst != me && h.dst != kEveryone) return fmt::format("a frame for rank {} at rank {}", h.dst, me);
  }
  return "";
}

}  // namespace pw
