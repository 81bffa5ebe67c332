#include "core/workload.hpp"

#include <string_view>

#include "core/error.hpp"

namespace pw {

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "none";
}

Recompute recompute_from_string(const char* text) {
  const std::string_view t = text ? text : "";
  if (t == "none") return Recompute::None;
  if (t == "selective") return Recompute::Selective;
  if (t == "full") return Recompute::Full;
  throw_bad_input("--recompute: unknown mode '{}'; use none, selective or full", t);
}

}  // namespace pw
