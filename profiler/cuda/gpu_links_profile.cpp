#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/units.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/device_memory.hpp"
#include "executor/cuda/gemm.hpp"
#include "executor/cuda/kernels.cuh"
#include "profiler/cuda/gpu_timing.hpp"
#include "profiler/link_line.hpp"
#include "profiler/profile.hpp"

namespace pw::cuda {
namespace {

using HostClock = std::chrono::steady_clock;

// One communicator, stream and buffers per GPU of a group, made in this process (ncclCommInitAll).
struct Group {
  std::vector<int> devices;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<void*> send, recv;

  Group(std::vector<int> devs, std::size_t bytes) : devices(std::move(devs)) {
    comms.resize(devices.size());
    PW_NCCL(nullptr, ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
    for (int d : devices) {
      DeviceGuard on(d);
      cudaStream_t s = nullptr;
      PW_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      streams.push_back(s);
      void* a = nullptr;
      void* b = nullptr;
      PW_CUDA(cudaMalloc(&a, bytes));
      PW_CUDA(cudaMalloc(&b, bytes));
      PW_CUDA(cudaMemset(a, 0, bytes));
      send.push_back(a);
      recv.push_back(b);
    }
  }
  ~Group() {
    for (size_t i = 0; i < devices.size(); ++i) {
      cudaSetDevice(devices[i]);
      cudaFree(send[i]);
      cudaFree(recv[i]);
      cudaStreamDestroy(streams[i]);
      ncclCommDestroy(comms[i]);
    }
  }
  void synchronize() {
    for (size_t i = 0; i < devices.size(); ++i) {
      DeviceGuard on(devices[i]);
      PW_CUDA(cudaStreamSynchronize(streams[i]));
    }
  }
  int size() const { return static_cast<int>(devices.size()); }
};

std::string device_list(const std::vector<int>& devices) {
  std::string out;
  for (int d : devices) out += fmt::format("{}{}", out.empty() ? "" : ",", d);
  return out;
}

// A -> B then B -> A over NCCL, timed on A's stream: the round trip, halved.
LinkProfile nccl_pair(Group& world, int a, int b, const std::vector<double>& sizes, int repetitions) {
  LinkProfile link;
  link.src = a;
  link.dst = b;
  cudaEvent_t start = nullptr, end = nullptr;
  {
    DeviceGuard on(a);
    PW_CUDA(cudaEventCreate(&start));
    PW_CUDA(cudaEventCreate(&end));
  }
  const auto trip = [&](std::size_t bytes) {
    PW_NCCL(world.comms[a], ncclGroupStart());
    PW_NCCL(world.comms[a], ncclSend(world.send[a], bytes, ncclChar, b, world.comms[a], world.streams[a]));
    PW_NCCL(world.comms[b], ncclRecv(world.recv[b], bytes, ncclChar, a, world.comms[b], world.streams[b]));
    PW_NCCL(world.comms[a], ncclGroupEnd());
    PW_NCCL(world.comms[b], ncclGroupStart());
    PW_NCCL(world.comms[b], ncclSend(world.recv[b], bytes, ncclChar, a, world.comms[b], world.streams[b]));
    PW_NCCL(world.comms[a], ncclRecv(world.recv[a], bytes, ncclChar, b, world.comms[a], world.streams[a]));
    PW_NCCL(world.comms[b], ncclGroupEnd());
  };
  for (double size : sizes) {
    const auto bytes = static_cast<std::size_t>(size);
    std::vector<double> one_way;
    trip(bytes);  // warm-up: connections are made on first use
    world.synchronize();
    for (int r = 0; r < repetitions; ++r) {
      {
        DeviceGuard on(a);
        PW_CUDA(cudaEventRecord(start, world.streams[a]));
      }
      trip(bytes);
      {
        DeviceGuard on(a);
        PW_CUDA(cudaEventRecord(end, world.streams[a]));
      }
      world.synchronize();
      float ms = 0;
      PW_CUDA(cudaEventElapsedTime(&ms, start, end));
      one_way.push_back(ms * 1e-3 / 2);
    }
    link.samples.push_back({size, timing_of(one_way).median_s});
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  fit_link(link);
  return link;
}

// What the local transport does on one GPU: a device-to-device copy.
LinkProfile local_copy(const std::vector<double>& sizes, int repetitions) {
  LinkProfile link;
  link.src = 0;
  link.dst = 1;
  DeviceGuard on(0);
  const auto largest = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));
  void* a = nullptr;
  void* b = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  PW_CUDA(cudaMalloc(&a, largest));
  PW_CUDA(cudaMalloc(&b, largest));
  PW_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  PW_CUDA(cudaEventCreate(&start));
  PW_CUDA(cudaEventCreate(&end));
  for (double size : sizes) {
    const auto bytes = static_cast<std::size_t>(size);
    std::vector<double> one_way;
    PW_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    for (int r = 0; r < repetitions; ++r) {
      PW_CUDA(cudaEventRecord(start, s));
      PW_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
      PW_CUDA(cudaEventRecord(end, s));
      PW_CUDA(cudaEventSynchronize(end));
      float ms = 0;
      PW_CUDA(cudaEventElapsedTime(&ms, start, end));
      one_way.push_back(ms * 1e-3);
    }
    link.samples.push_back({size, timing_of(one_way).median_s});
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
  fit_link(link);
  return link;
}

std::string link_table(const LinkProfile& l, const std::string& what) {
  std::string out = fmt::format("  link GPU {} -> GPU {} ({})\n", l.src, l.dst, what);
  out += fmt::format("  {:>10} {:>12} {:>12}\n", "size", "time", "bandwidth");
  for (const LinkSample& s : l.samples)
    out += fmt::format("  {:>10} {:>12} {:>12}\n", format_bytes(s.bytes), format_seconds(s.time_s),
                       format_rate(s.time_s > 0 ? s.bytes / s.time_s : 0));
  out += "  " + link_fit_text(l) + "\n\n";
  return out;
}

ncclDataType_t nccl_type(DType t) { return t == DType::BF16 ? ncclBfloat16 : ncclFloat32; }

void launch(Group& g, CollectiveOp op, double bytes, DType dtype) {
  const int n = g.size();
  const long count = nccl_count(op, bytes, n, dtype_bytes(dtype));
  PW_NCCL(g.comms[0], ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    switch (op) {
      case CollectiveOp::AllReduce:
        PW_NCCL(g.comms[i], ncclAllReduce(g.send[i], g.recv[i], count, nccl_type(dtype), ncclSum, g.comms[i], g.streams[i]));
        break;
      case CollectiveOp::AllGather:
        PW_NCCL(g.comms[i], ncclAllGather(g.send[i], g.recv[i], count, nccl_type(dtype), g.comms[i], g.streams[i]));
        break;
      case CollectiveOp::ReduceScatter:
        PW_NCCL(g.comms[i], ncclReduceScatter(g.send[i], g.recv[i], count, nccl_type(dtype), ncclSum, g.comms[i], g.streams[i]));
        break;
      default: throw_runtime("collective {} is not profiled", to_string(op));
    }
  }
  PW_NCCL(g.comms[0], ncclGroupEnd());
}

}  // namespace

std::vector<LinkProfile> profile_gpu_links(int devices, const std::vector<double>& sizes, int repetitions, bool all_pairs,
                                           std::string& report) {
  std::vector<LinkProfile> links;
  if (devices == 1) {
    links.push_back(local_copy(sizes, repetitions));
    report += link_table(links.back(), "one GPU: a device-to-device copy, as the local transport moves tensors");
    return links;
  }
  std::vector<int> all;
  for (int d = 0; d < devices; ++d) all.push_back(d);
  Group world(all, static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end())));
  for (int a = 0; a < devices; ++a)
    for (int b = a + 1; b < devices; ++b) {
      if (!all_pairs && (a != 0 || b != 1)) continue;
      links.push_back(nccl_pair(world, a, b, sizes, repetitions));
      report += link_table(links.back(), "NCCL send/receive, half the median round trip");
    }
  return links;
}

std::string profile_gpu_collectives(const std::vector<std::vector<int>>& groups, const std::string& kind,
                                    const std::vector<double>& sizes, int repetitions, DType dtype,
                                    const std::vector<LinkProfile>& links, std::vector<CollectiveProfile>& measured) {
  std::string out;
  const double largest = *std::max_element(sizes.begin(), sizes.end());
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (groups[gi].size() < 2) continue;
    Group group(groups[gi], static_cast<std::size_t>(largest) + 4096);
    const std::string name = fmt::format("{} group {} (GPUs {})", kind, gi, device_list(groups[gi]));
    const LinkSpec ring = group_link(groups[gi], links);
    for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter}) {
      std::vector<BandwidthSample> samples;
      for (double size : sizes) {
        const double bytes = round_to_ranks(op, size, group.size(), dtype_bytes(dtype));
        if (bytes > largest) continue;
        for (int w = 0; w < 2; ++w) launch(group, op, bytes, dtype);
        group.synchronize();
        const auto t0 = HostClock::now();
        for (int r = 0; r < repetitions; ++r) launch(group, op, bytes, dtype);
        group.synchronize();
        const double mean = std::chrono::duration<double>(HostClock::now() - t0).count() / repetitions;
        samples.push_back(bandwidth_sample(op, group.size(), bytes, mean));
        measured.push_back(collective_profile(samples.back(), ring));
      }
      out += nccl_tests_table(samples, to_string(dtype), dtype_bytes(dtype), name) + "\n";
    }
  }
  return out;
}

std::string profile_gemm_overlap(int devices, GpuSpec& gpu) {
  constexpr int kDim = 8192;
  constexpr int kGemms = 5;
  DeviceGuard on(0);
  cudaDeviceProp prop{};
  PW_CUDA(cudaGetDeviceProperties(&prop, 0));
  gpu.name = prop.name;
  gpu.memory_bytes = static_cast<double>(prop.totalGlobalMem);
  DeviceAllocator allocator(0);
  cudaStream_t stream = nullptr;
  PW_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::string out;
  {
    Gemm gemm(stream, allocator);
    const std::size_t bytes = static_cast<std::size_t>(kDim) * kDim * 2;
    const BlockPtr a = allocate_block(allocator, bytes), b = allocate_block(allocator, bytes), c = allocate_block(allocator, bytes);
    // Random operands: on zeros the tensor cores draw less power and hold higher clocks (an H200 ran this
    // GEMM at 889 TFLOP/s on zeros here, about 790 on random data), which is not the rate a model's GEMMs see.
    fill_normal(DType::BF16, a->data(), static_cast<long>(kDim) * kDim, 1, 1.0f, stream);
    fill_normal(DType::BF16, b->data(), static_cast<long>(kDim) * kDim, 2, 1.0f, stream);
    cudaEvent_t start = nullptr, end = nullptr;
    PW_CUDA(cudaEventCreate(&start));
    PW_CUDA(cudaEventCreate(&end));
    const auto timed_gemms = [&] {
      PW_CUDA(cudaEventRecord(start, stream));
      for (int i = 0; i < kGemms; ++i)
        gemm.run(DType::BF16, DType::BF16, kDim, kDim, kDim, {a->data(), kDim, false, 0}, {b->data(), kDim, false, 0},
                 c->data(), kDim, 0, 1.0f, 0.0f);
      PW_CUDA(cudaEventRecord(end, stream));
    };
    const auto elapsed = [&] {
      PW_CUDA(cudaEventSynchronize(end));
      float ms = 0;
      PW_CUDA(cudaEventElapsedTime(&ms, start, end));
      return ms * 1e-3 / kGemms;
    };
    timed_gemms();  // warm-up
    elapsed();
    timed_gemms();
    const double alone = elapsed();
    gpu.peak_flops = 2.0 * kDim * kDim * static_cast<double>(kDim) / alone;
    // Memory bandwidth: a copy reads and writes each byte.
    PW_CUDA(cudaEventRecord(start, stream));
    PW_CUDA(cudaMemcpyAsync(c->data(), a->data(), bytes, cudaMemcpyDeviceToDevice, stream));
    PW_CUDA(cudaEventRecord(end, stream));
    PW_CUDA(cudaEventSynchronize(end));
    float copy_ms = 0;
    PW_CUDA(cudaEventElapsedTime(&copy_ms, start, end));
    gpu.hbm_bytes_per_s = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3);
    out += fmt::format("  GPU 0 ({}): bf16 GEMM {}x{}x{} alone {} ({}), device copy {}\n", gpu.name, kDim, kDim, kDim,
                       format_seconds(alone), format_flops(gpu.peak_flops), format_rate(gpu.hbm_bytes_per_s));
    if (devices >= 2) {
      std::vector<int> all;
      for (int d = 0; d < devices; ++d) all.push_back(d);
      constexpr double kTraffic = 256.0 * 1024 * 1024;
      Group group(all, static_cast<std::size_t>(kTraffic));
      // Enough all-reduces to outlast the GEMMs.
      for (int i = 0; i < 40; ++i) launch(group, CollectiveOp::AllReduce, kTraffic, DType::BF16);
      timed_gemms();
      const double beside = elapsed();
      group.synchronize();
      out += fmt::format("  with 256 MiB all-reduces on all {} GPUs beside it: {} per GEMM, {:.1f}% slower\n", devices,
                         format_seconds(beside), overlap_slowdown(alone, beside) * 100);
    } else {
      out += "  one GPU: no NCCL traffic to run beside the GEMM\n";
    }
    cudaEventDestroy(start);
    cudaEventDestroy(end);
  }
  cudaStreamDestroy(stream);
  return out;
}

}  // namespace pw::cuda
