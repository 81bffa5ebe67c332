#include "executor/cuda/host/gpu_error.hpp"

#include <array>

#include <fmt/format.h>

namespace pw {

std::string_view repository_path(std::string_view file) {
  // The earliest top-level folder wins, so "/src/executor/cuda/profiler/x.cpp" keeps "executor/...".
  size_t best = std::string_view::npos;
  for (std::string_view folder : std::array<std::string_view, 5>{"executor/", "profiler/", "tests/", "cli/", "core/"}) {
    for (size_t at = file.find(folder); at != std::string_view::npos; at = file.find(folder, at + 1)) {
      if (at == 0 || file[at - 1] == '/') {
        if (at < best) best = at;
        break;
      }
    }
  }
  return best == std::string_view::npos ? file : file.substr(best);
}

std::string gpu_failure_text(std::string_view library, std::string_view call, std::string_view file, int line,
                             std::string_view status, std::string_view message, std::string_view detail) {
  return fmt::format("{}:{}: {} call {} failed: {} ({}){}{}", repository_path(file), line, library, call, status, message,
                     detail.empty() ? "" : "; ", detail);
}

bool gpu_present(const GpuProbe& probe) { return !probe.failed && probe.count > 0; }

std::string no_gpu_text(const GpuProbe& probe) {
  if (probe.failed) return fmt::format("no CUDA GPU here: cudaGetDeviceCount failed: {}", probe.error);
  return fmt::format("no CUDA GPU here: cudaGetDeviceCount found {} devices", probe.count);
}

std::string cuda_not_built_text() {
  return "--backend: this pipewright was built without CUDA; rebuild with -DPIPEWRIGHT_CUDA=ON where nvcc and NCCL "
         "are installed, or use --backend cpu";
}

}  // namespace pw
