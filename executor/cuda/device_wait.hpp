#pragma once
// Host waits on GPU work that cannot hang: each polls with a deadline and a stop flag, so that a peer that
// never answers (a dead rank, a broken link) ends in RecvTimeout or RunAborted, never in a blocked thread.
#include <atomic>

#include <cuda_runtime.h>
#include <nccl.h>

#include "executor/transport.hpp"

namespace pw::cuda {

// Until `event` completed. Throws RunAborted once `stop` is set, RecvTimeout past `deadline`, and a Runtime
// error when `comm` (may be null) reports an asynchronous NCCL error.
void wait_event(cudaEvent_t event, Clock::time_point deadline, const std::atomic<bool>* stop, ncclComm_t comm);

// Until a nonblocking communicator finished its last call (ncclCommGetAsyncError leaves ncclInProgress).
// Throws as wait_event; `what` names the call in the timeout's message.
void wait_comm(ncclComm_t comm, Clock::time_point deadline, const std::atomic<bool>* stop, const char* what);

}  // namespace pw::cuda
