#include "executor/cuda/device_wait.hpp"

#include <thread>

#include "core/error.hpp"
#include "executor/cuda/cuda_check.hpp"

namespace pw::cuda {
namespace {

void check_peer(ncclComm_t comm) {
  if (!comm) return;
  ncclResult_t state = ncclSuccess;
  PW_NCCL(comm, ncclCommGetAsyncError(comm, &state));
  if (state != ncclSuccess && state != ncclInProgress) fail_nccl(state, comm, "ncclCommGetAsyncError(comm, &state)", __FILE__, __LINE__);
}

}  // namespace

void wait_event(cudaEvent_t event, Clock::time_point deadline, const std::atomic<bool>* stop, ncclComm_t comm) {
  for (long spins = 0;; ++spins) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) PW_CUDA(e);
    if (stop && *stop) throw RunAborted();
    // Polling NCCL's error state costs more than an event query: every 64th turn.
    if (spins % 64 == 0) check_peer(comm);
    if (Clock::now() >= deadline) throw RecvTimeout();
    std::this_thread::yield();
  }
}

void wait_comm(ncclComm_t comm, Clock::time_point deadline, const std::atomic<bool>* stop, const char* what) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    PW_NCCL(comm, ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail_nccl(state, comm, what, __FILE__, __LINE__);
    if (stop && *stop) throw RunAborted();
    if (Clock::now() >= deadline) throw_runtime("NCCL: {} did not complete before the deadline; is every rank running?", what);
    std::this_thread::yield();
  }
}

}  // namespace pw::cuda
