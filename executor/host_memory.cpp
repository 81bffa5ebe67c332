#include "executor/host_memory.hpp"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace pw {

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    // Every block from the heap (none mapped on its own), and the heap never trimmed: what was freed is
    // what the next action gets. Setting either also stops glibc from moving the thresholds itself.
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, -1);
    mallopt(M_TOP_PAD, 64 << 20);
  });
#endif
}

}  // namespace pw
