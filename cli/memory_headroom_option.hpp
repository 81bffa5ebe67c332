#pragma once
// --memory-headroom: the share of each GPU's memory every plan leaves free (Cluster::memory_headroom).
#include <CLI/CLI.hpp>

#include <string>

#include "core/cluster.hpp"

namespace pw {

CLI::Option* add_memory_headroom_option(CLI::App& cmd, std::string& text);

// Sets the cluster's headroom from a percentage such as "5%" (empty: the cluster's own, by default
// kDefaultMemoryHeadroom); BadInput naming --memory-headroom for anything else.
void apply_memory_headroom(const std::string& text, Cluster& cluster);

}  // namespace pw
