#pragma once
// How this process's heap treats freed memory while the CPU backend or profiler runs.

namespace pw {

// Keeps freed blocks in the process for reuse, as a GPU framework's caching allocator does, instead of
// glibc's default of handing blocks of 128 KiB and more back to the kernel (mmap and trimming): every
// action allocates and frees its tensors, so with the default each one pays page faults for fresh zeroed
// memory, a cost that grows with the micro-batch and jumps where a tensor crosses the threshold (on the
// tiny models, up to +24% per sequence between micro-batch sizes 2 and 4, and a different jump from one
// profile to the next). Process-wide and idempotent; does nothing outside glibc.
void keep_freed_host_memory();

}  // namespace pw
