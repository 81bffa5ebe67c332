#include "executor/cuda/nccl_transport.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/device_wait.hpp"

namespace pw::cuda {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(UniqueIdBytes), "an NCCL unique id is 128 bytes");

ncclConfig_t nonblocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

cudaEvent_t new_event() {
  cudaEvent_t e = nullptr;
  PW_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

}  // namespace

UniqueIdBytes nccl_unique_id() {
  ncclUniqueId id;
  PW_NCCL(nullptr, ncclGetUniqueId(&id));
  UniqueIdBytes bytes{};
  std::memcpy(bytes.data(), &id, bytes.size());
  return bytes;
}

NcclTransport::NcclTransport(const Schedule& lowered, DType dtype, long rows, long cols, std::pair<int, int> tied)
    : plan_(lowered), dtype_(dtype), rows_(rows), cols_(cols), tied_(tied) {
  ranks_.resize(static_cast<size_t>(lowered.num_ranks()));
}

std::size_t NcclTransport::message_bytes() const { return static_cast<std::size_t>(rows_ * cols_) * dtype_bytes(dtype_); }

NcclTransport::RankState& NcclTransport::state(int rank) {
  RankState* s = ranks_.at(static_cast<size_t>(rank)).get();
  if (!s) throw_runtime("NCCL transport: rank {} has not connected", rank);
  return *s;
}

void NcclTransport::connect(int rank, int world, const UniqueIdBytes& id, DeviceAllocator& allocator,
                            Clock::time_point deadline, const std::atomic<bool>* stop) {
  auto s = std::make_unique<RankState>();
  s->rank = rank;
  s->allocator = &allocator;
  PW_CUDA(cudaGetDevice(&s->device));
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  ncclConfig_t config = nonblocking();
  PW_NCCL(nullptr, ncclCommInitRankConfig(&s->world, world, uid, rank, &config));
  wait_comm(s->world, deadline, stop, "ncclCommInitRankConfig");
  const std::vector<Channel>& channels = plan_.channels();
  s->comms.assign(channels.size(), nullptr);
  s->streams.assign(channels.size(), nullptr);
  s->sent.assign(channels.size(), 0);
  for (size_t c = 0; c < channels.size(); ++c) {
    s->cursors.emplace_back(static_cast<int>(channels[c].messages.size()));
    const bool member = channels[c].src == rank || channels[c].dst == rank;
    // In each channel's communicator the sender is rank 0 and the receiver rank 1.
    ncclConfig_t split_config = nonblocking();
    PW_NCCL(s->world, ncclCommSplit(s->world, member ? 0 : NCCL_SPLIT_NOCOLOR, channels[c].src == rank ? 0 : 1,
                                    &s->comms[c], &split_config));
    wait_comm(s->world, deadline, stop, "ncclCommSplit");
    if (member) {
      wait_comm(s->comms[c], deadline, stop, "ncclCommSplit");
      PW_CUDA(cudaStreamCreateWithFlags(&s->streams[c], cudaStreamNonBlocking));
    }
  }
  if (tied_.first >= 0 && tied_.first != tied_.second) {
    // Split after the channels, by every rank alike (collective): the lower tied rank is 0 in it.
    const bool member = rank == tied_.first || rank == tied_.second;
    ncclConfig_t split_config = nonblocking();
    PW_NCCL(s->world, ncclCommSplit(s->world, member ? 0 : NCCL_SPLIT_NOCOLOR, rank == std::min(tied_.first, tied_.second) ? 0 : 1,
                                    &s->tied, &split_config));
    wait_comm(s->world, deadline, stop, "ncclCommSplit");
    if (member) {
      wait_comm(s->tied, deadline, stop, "ncclCommSplit");
      PW_CUDA(cudaStreamCreateWithFlags(&s->tied_stream, cudaStreamNonBlocking));
    }
  }
  ranks_.at(static_cast<size_t>(rank)) = std::move(s);
}

void NcclTransport::reap(RankState& s, bool all, Clock::time_point deadline) {
  while (!s.in_flight.empty()) {
    InFlight& f = s.in_flight.front();
    if (all) {
      wait_event(f.done, deadline, &aborted_, nullptr);
    } else {
      const cudaError_t e = cudaEventQuery(f.done);
      if (e == cudaErrorNotReady) return;
      PW_CUDA(e);
    }
    PW_CUDA(cudaEventDestroy(f.done));
    s.in_flight.pop_front();
  }
}

void NcclTransport::send(int src, int dst, const MessageKey& key, Message message) {
  RankState& s = state(src);
  const int ch = plan_.channel_of(src, dst);
  if (ch < 0) throw_runtime("NCCL transport: the schedule has no channel from rank {} to rank {}", src, dst);
  const long expected = s.sent[static_cast<size_t>(ch)] % static_cast<long>(plan_.channels()[static_cast<size_t>(ch)].messages.size());
  if (plan_.position(ch, key) != expected)
    throw_runtime("NCCL transport: rank {} sends {} of stage {} micro-batch {} out of the schedule's order", src,
                  to_string(key.op), key.stage, key.microbatch);
  if (!message.tensor) throw_runtime("NCCL transport: rank {} sends no tensor", src);
  const auto& t = static_cast<const DeviceTensor&>(*message.tensor);
  if (static_cast<std::size_t>(t.bytes()) != message_bytes())
    throw_runtime("NCCL transport: a message of {} bytes where every message has {}", t.bytes(), message_bytes());
  ncclComm_t comm = s.comms[static_cast<size_t>(ch)];
  cudaStream_t stream = s.streams[static_cast<size_t>(ch)];
  PW_NCCL(comm, ncclSend(t.data(), message_bytes(), ncclChar, 1, comm, stream));
  wait_comm(comm, Clock::now() + std::chrono::seconds(60), &aborted_, "ncclSend");
  cudaEvent_t done = new_event();
  PW_CUDA(cudaEventRecord(done, stream));
  s.in_flight.push_back({std::move(message.tensor), done});
  ++s.sent[static_cast<size_t>(ch)];
  {
    std::lock_guard lock(info_mutex_);
    sent_info_[{src, key}] = {message.sent, message.flow_id};
  }
  reap(s, false, {});
}

Message NcclTransport::recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) {
  RankState& s = state(dst);
  const int ch = plan_.channel_of(src, dst);
  if (ch < 0) throw_runtime("NCCL transport: the schedule has no channel from rank {} to rank {}", src, dst);
  const int per_iteration = static_cast<int>(plan_.channels()[static_cast<size_t>(ch)].messages.size());
  const int position = plan_.position(ch, key);
  const long global = static_cast<long>(key.iteration) * per_iteration + position;
  ncclComm_t comm = s.comms[static_cast<size_t>(ch)];
  cudaStream_t stream = s.streams[static_cast<size_t>(ch)];
  const ReceiveCursor::Range range = s.cursors[static_cast<size_t>(ch)].post_through(key.iteration, position);
  if (!range.empty()) {
    auto done = std::shared_ptr<cudaEvent_t>(new cudaEvent_t(new_event()), [](cudaEvent_t* e) {
      cudaEventDestroy(*e);
      delete e;
    });
    PW_NCCL(comm, ncclGroupStart());
    for (long p = range.first; p <= range.last; ++p) {
      auto buffer = std::make_shared<DeviceTensor>(*s.allocator, dtype_, rows_, cols_);
      PW_NCCL(comm, ncclRecv(buffer->data(), message_bytes(), ncclChar, 0, comm, stream));
      s.posted[{ch, p}] = Posted{std::move(buffer), done};
    }
    PW_NCCL(comm, ncclGroupEnd());
    wait_comm(comm, deadline, &aborted_, "ncclRecv");
    PW_CUDA(cudaEventRecord(*done, stream));
  }
  auto it = s.posted.find({ch, global});
  if (it == s.posted.end())
    throw_runtime("NCCL transport: rank {} receives {} of stage {} micro-batch {} a second time", dst, to_string(key.op),
                  key.stage, key.microbatch);
  wait_event(*it->second.done, deadline, &aborted_, comm);
  Message m;
  m.tensor = std::move(it->second.tensor);
  s.posted.erase(it);
  m.sent = Clock::now();
  {
    std::lock_guard lock(info_mutex_);
    auto info = sent_info_.find({src, key});
    if (info != sent_info_.end()) {
      m.sent = info->second.first;
      m.flow_id = info->second.second;
      sent_info_.erase(info);
    }
  }
  reap(s, false, {});
  return m;
}

void NcclTransport::exchange_tied(int rank, const void* mine, void* into, std::size_t bytes, Clock::time_point deadline) {
  RankState& s = state(rank);
  if (!s.tied) throw_runtime("NCCL transport: rank {} holds no copy of the tied embedding matrix", rank);
  const int peer = rank == std::min(tied_.first, tied_.second) ? 1 : 0;
  PW_NCCL(s.tied, ncclGroupStart());
  PW_NCCL(s.tied, ncclSend(mine, bytes, ncclChar, peer, s.tied, s.tied_stream));
  PW_NCCL(s.tied, ncclRecv(into, bytes, ncclChar, peer, s.tied, s.tied_stream));
  PW_NCCL(s.tied, ncclGroupEnd());
  wait_comm(s.tied, deadline, &aborted_, "ncclSend/ncclRecv of the tied gradients");
  cudaEvent_t done = new_event();
  try {
    PW_CUDA(cudaEventRecord(done, s.tied_stream));
    wait_event(done, deadline, &aborted_, s.tied);
  } catch (...) {
    cudaEventDestroy(done);
    throw;
  }
  PW_CUDA(cudaEventDestroy(done));
}

void NcclTransport::abort() { aborted_ = true; }

NcclTransport::~NcclTransport() {
  // Sends still in flight finish once their receives were posted; a run that failed may leave some that never
  // will, and then the communicators are aborted rather than finalised.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (auto& p : ranks_) {
    if (!p) continue;
    RankState& s = *p;
    cudaSetDevice(s.device);
    bool clean = !aborted_;
    try {
      if (clean) reap(s, true, deadline);
    } catch (const std::exception&) {
      clean = false;
    }
    std::vector<ncclComm_t> comms;
    for (ncclComm_t c : s.comms)
      if (c) comms.push_back(c);
    if (s.tied) comms.push_back(s.tied);
    comms.push_back(s.world);
    for (ncclComm_t c : comms) {
      bool finalized = false;
      const ncclResult_t started = clean ? ncclCommFinalize(c) : ncclInvalidUsage;
      if (started == ncclSuccess || started == ncclInProgress) {
        try {
          wait_comm(c, deadline, nullptr, "ncclCommFinalize");
          finalized = true;
        } catch (const std::exception&) {
        }
      }
      if (finalized)
        ncclCommDestroy(c);
      else
        ncclCommAbort(c);
    }
    // Buffers go back only now: an aborted communicator no longer writes into them.
    s.posted.clear();
    for (InFlight& f : s.in_flight) cudaEventDestroy(f.done);
    s.in_flight.clear();
    for (cudaStream_t st : s.streams)
      if (st) cudaStreamDestroy(st);
    if (s.tied_stream) cudaStreamDestroy(s.tied_stream);
  }
}

}  // namespace pw::cuda
