#pragma once
// How much memory this machine can give a command now: what the bounds before work hold estimates against.
#include <optional>
#include <string_view>

namespace pw {

// The MemAvailable line of /proc/meminfo's text ("MemAvailable:   22394676 kB"), in bytes.
std::optional<double> mem_available_bytes(std::string_view meminfo);

// MemAvailable from /proc/meminfo; without it, the physical memory.
double available_memory_bytes();

}  // namespace pw
